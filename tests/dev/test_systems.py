"""The demo's order system, billing and CRM, over real HTTP on a free port with its own SQLite file: what it shows,
what it changes, what it refuses, and that a write is done once per idempotency key."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from vigil.core.clock import SystemClock
from vigil.dev.broker import free_port
from vigil.dev.systems.seed import ensure_seeded, seed
from vigil.dev.systems.server import SystemsServer

TOKEN = "s3cret-token"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "systems.sqlite"
    seed(path, now=SystemClock().now())
    return path


@pytest.fixture
async def shop(db: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with SystemsServer(db) as server, httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        yield client


def count(db: Path, sql: str, *args: object) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(sql, args).fetchone()[0])


async def write(
    shop: httpx.AsyncClient, method: str, path: str, body: dict[str, object] | None = None, *, key: str
) -> httpx.Response:
    return await shop.request(method, path, json=body, headers={"Idempotency-Key": key})


def test_the_seed_is_a_small_shop_with_orders_in_every_state(db: Path):
    assert count(db, "SELECT count(*) FROM customers") == 12
    assert count(db, "SELECT count(*) FROM orders") == 30
    for status in ("pending", "processed", "delivered", "cancelled"):
        assert count(db, "SELECT count(*) FROM orders WHERE status = ?", status) >= 4
    with pytest.raises(FileExistsError):
        seed(db, now=SystemClock().now())
    assert ensure_seeded(db, now=SystemClock().now()) is False


def test_the_seed_is_the_same_for_the_same_moment(tmp_path: Path):
    now = datetime(2026, 5, 1, 12, tzinfo=UTC)
    dumps = []
    for name in ("a.sqlite", "b.sqlite"):
        assert ensure_seeded(tmp_path / name, now=now) is True
        with sqlite3.connect(tmp_path / name) as conn:
            dumps.append([line for line in conn.iterdump() if "INSERT" in line])
    assert dumps[0] == dumps[1] and len(dumps[0]) > 60


async def test_a_customer_is_found_by_id_or_email_with_their_payment_methods(shop: httpx.AsyncClient):
    rossi = (await shop.get("/customers/CUS-1008")).json()
    assert rossi["name"] == "Daniel Rossi" and rossi["two_factor"]["enabled"] is True
    newest = rossi["payment_methods"][-1]
    assert newest["id"] == "PM-5011"
    assert datetime.now(UTC) - datetime.fromisoformat(newest["added_at"]) < timedelta(days=1)
    found = (await shop.get("/customers", params={"email": "  Liam.Chen@EXAMPLE.com"})).json()["customers"]
    assert [c["id"] for c in found] == ["CUS-1004"]
    assert (await shop.get("/customers", params={"email": "nobody@example.com"})).json() == {"customers": []}
    missing = await shop.get("/customers/CUS-9999")
    assert missing.status_code == 404 and missing.json() == {"detail": "no customer CUS-9999"}


async def test_an_order_shows_its_refunds_and_what_is_left_to_refund(shop: httpx.AsyncClient):
    order = (await shop.get("/orders/ORD-10019")).json()
    assert order["total_cents"] == 55800 and order["refunded_cents"] == 27900 and order["refundable_cents"] == 27900
    assert [r["id"] for r in order["refunds"]] == ["RF-70002"]
    orders = (await shop.get("/customers/CUS-1001/orders")).json()["orders"]
    assert [o["id"] for o in orders] == ["ORD-10003", "ORD-10002", "ORD-10001"]
    credits = (await shop.get("/customers/CUS-1008/credits")).json()
    assert credits["total_cents"] == 4000 and len(credits["credits"]) == 2
    assert (await shop.get("/orders/ORD-1")).status_code == 404


async def test_a_refund_is_made_once_per_key_and_replayed_after(shop: httpx.AsyncClient, db: Path):
    body = {"amount_cents": 1200, "payment_method_id": "PM-5010", "reason": "scratched stand"}
    first = await write(shop, "POST", "/orders/ORD-10019/refunds", body, key="refund-1")
    assert first.status_code == 201 and "idempotent-replayed" not in first.headers
    assert first.json()["order"]["refundable_cents"] == 27900 - 1200
    again = await write(shop, "POST", "/orders/ORD-10019/refunds", body, key="refund-1")
    assert again.status_code == 201 and again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert count(db, "SELECT count(*) FROM refunds WHERE reason = 'scratched stand'") == 1


async def test_a_key_used_again_for_another_request_is_refused(shop: httpx.AsyncClient, db: Path):
    body = {"amount_cents": 500, "payment_method_id": "PM-5010", "reason": "first"}
    assert (await write(shop, "POST", "/orders/ORD-10019/refunds", body, key="k")).status_code == 201
    other = await write(shop, "POST", "/orders/ORD-10019/refunds", {**body, "amount_cents": 700}, key="k")
    assert other.status_code == 422 and "already used for a different request" in other.json()["detail"]
    elsewhere = await write(shop, "POST", "/customers/CUS-1008/credits", {"amount_cents": 500, "reason": "x"}, key="k")
    assert elsewhere.status_code == 422
    assert count(db, "SELECT count(*) FROM refunds WHERE order_id = 'ORD-10019'") == 2
    assert count(db, "SELECT count(*) FROM credits WHERE customer_id = 'CUS-1008'") == 2


async def test_concurrent_requests_with_one_key_make_one_refund(shop: httpx.AsyncClient, db: Path):
    body = {"amount_cents": 100, "payment_method_id": "PM-5001", "reason": "raced"}
    answers = await asyncio.gather(
        *(write(shop, "POST", "/orders/ORD-10001/refunds", body, key="race") for _ in range(6))
    )
    assert {a.status_code for a in answers} == {201}
    assert len({a.json()["id"] for a in answers}) == 1
    assert sum(a.headers.get("idempotent-replayed") == "true" for a in answers) == 5
    assert count(db, "SELECT count(*) FROM refunds WHERE reason = 'raced'") == 1


async def test_a_write_without_a_key_is_refused_and_does_nothing(shop: httpx.AsyncClient, db: Path):
    answer = await shop.post("/orders/ORD-10003/cancel", json={"reason": "no key"})
    assert answer.status_code == 400 and "Idempotency-Key" in answer.json()["detail"]
    assert (await shop.get("/orders/ORD-10003")).json()["status"] == "pending"


async def test_refunds_are_refused_with_a_reason(shop: httpx.AsyncClient, db: Path):
    def refund(amount: int, method: str) -> dict[str, object]:
        return {"amount_cents": amount, "payment_method_id": method, "reason": "r"}

    over = await write(shop, "POST", "/orders/ORD-10002/refunds", refund(15000, "PM-5001"), key="a")
    assert over.status_code == 409
    assert over.json()["detail"] == "refund of 15000 cents exceeds the refundable 14199 cents of order ORD-10002"
    pending = await write(shop, "POST", "/orders/ORD-10003/refunds", refund(100, "PM-5002"), key="b")
    assert pending.status_code == 409 and "pending" in pending.json()["detail"]
    foreign = await write(shop, "POST", "/orders/ORD-10002/refunds", refund(100, "PM-5010"), key="c")
    assert foreign.status_code == 422
    assert foreign.json()["detail"] == "payment method PM-5010 is not one of customer CUS-1001's payment methods"
    nothing = await write(shop, "POST", "/orders/ORD-10002/refunds", refund(0, "PM-5001"), key="d")
    assert nothing.status_code == 422
    gone = await write(shop, "POST", "/orders/ORD-99999/refunds", refund(100, "PM-5001"), key="e")
    assert gone.status_code == 404
    assert count(db, "SELECT count(*) FROM refunds") == 3
    # A refusal is an answer too: the same key gets it again, even once the refund would fit.
    replay = await write(shop, "POST", "/orders/ORD-10002/refunds", refund(15000, "PM-5001"), key="a")
    assert replay.status_code == 409 and replay.headers["idempotent-replayed"] == "true"


async def test_an_order_is_cancelled_or_readdressed_only_before_delivery(shop: httpx.AsyncClient):
    cancelled = await write(shop, "POST", "/orders/ORD-10008/cancel", {"reason": "ordered twice"}, key="1")
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled" and cancelled.json()["cancel_reason"] == "ordered twice"
    late = await write(shop, "POST", "/orders/ORD-10001/cancel", {"reason": "too late"}, key="2")
    assert (
        late.status_code == 409
        and late.json()["detail"] == "order ORD-10001 is delivered and can no longer be cancelled"
    )
    elm = {"line1": "5 Elm Road", "city": "Leeds", "postcode": "LS1 4AP"}
    moved = await write(shop, "PUT", "/orders/ORD-10005/address", {"address": elm}, key="3")
    assert moved.json()["shipping_address"] == "5 Elm Road, Leeds LS1 4AP"
    stuck = await write(shop, "PUT", "/orders/ORD-10004/address", {"address": elm}, key="4")
    assert stuck.status_code == 409
    assert (await shop.get("/orders/ORD-10004")).json()["shipping_address"].startswith("27 Oldham Street")


async def test_account_changes_in_the_crm(shop: httpx.AsyncClient):
    email = await write(shop, "PUT", "/customers/CUS-1002/email", {"email": "james@okafor.example"}, key="1")
    assert email.status_code == 200 and email.json()["email"] == "james@okafor.example"
    taken = await write(shop, "PUT", "/customers/CUS-1002/email", {"email": "MARIA.keller@example.com"}, key="2")
    assert taken.status_code == 409
    invalid = await write(shop, "PUT", "/customers/CUS-1002/email", {"email": "not an address"}, key="3")
    assert invalid.status_code == 422
    reset = await write(shop, "POST", "/customers/CUS-1003/two-factor/reset", key="4")
    assert reset.status_code == 200 and reset.json()["two_factor"]["enabled"] is False
    assert reset.json()["two_factor"]["reset_at"] is not None
    twice = await write(shop, "POST", "/customers/CUS-1003/two-factor/reset", key="5")
    assert twice.status_code == 409
    added = await write(
        shop, "POST", "/customers/CUS-1005/payment-methods", {"kind": "card", "label": "Visa 1111"}, key="6"
    )
    assert added.status_code == 201 and added.json()["id"] == "PM-60001"
    methods = (await shop.get("/customers/CUS-1005")).json()["payment_methods"]
    assert [m["id"] for m in methods] == ["PM-5007", "PM-60001"]
    credit = await write(shop, "POST", "/customers/CUS-1005/credits", {"amount_cents": 500, "reason": "sorry"}, key="7")
    assert credit.status_code == 201 and credit.json()["id"] == "CR-80004"
    assert (await shop.get("/customers/CUS-1005/credits")).json()["total_cents"] == 500


async def test_a_token_guards_every_request(db: Path):
    async with SystemsServer(db, token=TOKEN) as server, httpx.AsyncClient(base_url=server.url) as client:
        assert (await client.get("/orders/ORD-10001")).status_code == 401
        wrong = await client.get("/orders/ORD-10001", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
        refused = await client.post("/orders/ORD-10003/cancel", json={"reason": "x"}, headers={"Idempotency-Key": "t"})
        assert refused.status_code == 401
        right = await client.get("/orders/ORD-10003", headers={"Authorization": f"Bearer {TOKEN}"})
        assert right.status_code == 200 and right.json()["status"] == "pending"


async def test_it_runs_on_its_own_seeded_on_first_start(tmp_path: Path):
    db, port = tmp_path / "own.sqlite", free_port()
    env = {**os.environ, "VIGIL_DEMO_SYSTEMS_TOKEN": TOKEN}
    command = [sys.executable, "-m", "vigil.dev.systems", "--db", str(db), "--port", str(port)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            deadline = time.monotonic() + 30
            while True:
                try:
                    answer = await client.get("/customers/CUS-1001", headers={"Authorization": f"Bearer {TOKEN}"})
                    break
                except httpx.ConnectError:
                    assert process.poll() is None and time.monotonic() < deadline, "the service did not start"
                    await asyncio.sleep(0.1)
            assert answer.status_code == 200 and answer.json()["name"] == "Maria Keller"
            assert (await client.get("/customers/CUS-1001")).status_code == 401
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=10)
    # uvicorn shuts down gracefully, then re-raises the signal so that the exit status tells how it ended.
    assert process.returncode in (0, -signal.SIGTERM), stderr.decode()
    assert b"seeded" in stderr and b"Finished server process" in stderr
