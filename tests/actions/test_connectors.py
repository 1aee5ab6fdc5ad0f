"""The connectors against the real demo systems on a free port: what they send, what they retry (only what a retry
cannot do twice), and how each failure reaches the caller."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from vigil.actions.connectors.http import Connectors, Operation
from vigil.actions.connectors.settings import SystemSettings
from vigil.core.clock import SystemClock
from vigil.core.errors import (
    ConnectorError,
    ConnectorRefused,
    ConnectorTimeout,
    ConnectorUnavailable,
    Unavailable,
)
from vigil.core.metrics import Metrics
from vigil.core.retry import Backoff
from vigil.dev.broker import free_port
from vigil.dev.systems.faults import Faults
from vigil.dev.systems.seed import seed
from vigil.dev.systems.server import SystemsServer

TOKEN = "connector-token"
TIMEOUT_S = 1.0  # generous: a busy machine must not make an ordinary request time out
REFUND = Operation(
    "billing",
    "POST",
    "/orders/{order_id}/refunds",
    body=("amount_cents", "payment_method_id", "reason"),
    idempotent=True,
)
CANCEL = Operation("orders", "POST", "/orders/{order_id}/cancel", body=("reason",), idempotent=True)


@dataclass
class Shop:
    url: str
    db: Path
    faults: Faults
    connectors: Connectors

    def refunds(self, reason: str) -> int:
        with sqlite3.connect(self.db) as conn:
            return int(conn.execute("SELECT count(*) FROM refunds WHERE reason = ?", (reason,)).fetchone()[0])

    def requests(self, method: str) -> list[str]:
        return [r for r in self.faults.requests if r.startswith(f"{method} ")]


def backoff() -> Backoff:
    return Backoff(SystemClock(), Metrics(CollectorRegistry()), initial_s=0.01, max_s=0.05)


def connectors_for(url: str, *, token: str | None = TOKEN, retries: int = 2) -> Connectors:
    settings = SystemSettings(
        base_url=url, token=SecretStr(token) if token else None, timeout_s=TIMEOUT_S, retries=retries
    )
    return Connectors({name: settings for name in ("orders", "billing", "crm")}, backoff=backoff())


@pytest.fixture
async def shop(tmp_path: Path) -> AsyncIterator[Shop]:
    db = tmp_path / "systems.sqlite"
    seed(db, now=SystemClock().now())
    faults = Faults()
    async with SystemsServer(db, token=TOKEN, faults=faults) as server, connectors_for(server.url) as connectors:
        yield Shop(server.url, db, faults, connectors)


def refund(amount: int, reason: str, method: str = "PM-5010") -> Mapping[str, object]:
    return {"order_id": "ORD-10019", "amount_cents": amount, "payment_method_id": method, "reason": reason}


async def test_an_operation_changes_the_system_and_a_read_shows_it(shop: Shop):
    made = await shop.connectors.perform(REFUND, refund(2500, "dented"), idempotency_key="rf-1")
    assert made["amount_cents"] == 2500 and made["id"] == "RF-70004"
    order = await shop.connectors.fetch("orders", "/orders/{order_id}", {"order_id": "ORD-10019"})
    assert order["refundable_cents"] == 27900 - 2500
    found = await shop.connectors.fetch("crm", "/customers", params={"email": "daniel.rossi@example.com"})
    assert [c["id"] for c in found["customers"]] == ["CUS-1008"]
    assert shop.refunds("dented") == 1


async def test_a_refusal_says_who_refused_what_and_why_and_is_not_retried(shop: Shop):
    with pytest.raises(ConnectorRefused) as refused:
        await shop.connectors.perform(REFUND, refund(30000, "too much"), idempotency_key="rf-2")
    assert str(refused.value) == (
        "billing refused POST /orders/ORD-10019/refunds: "
        "409 refund of 30000 cents exceeds the refundable 27900 cents of order ORD-10019"
    )
    assert refused.value.system == "billing" and refused.value.status == 409
    assert not isinstance(refused.value, Unavailable)
    assert len(shop.requests("POST")) == 1


async def test_an_invalid_argument_is_refused_with_the_systems_words(shop: Shop):
    with pytest.raises(ConnectorRefused) as refused:
        await shop.connectors.perform(REFUND, refund(0, "nothing"), idempotency_key="rf-3")
    assert refused.value.status == 422
    assert refused.value.detail == "amount_cents: Input should be greater than 0"


async def test_a_wrong_token_is_refused(shop: Shop):
    async with connectors_for(shop.url, token="wrong") as wrong:
        with pytest.raises(ConnectorRefused, match="orders refused GET /orders/ORD-10001: 401"):
            await wrong.fetch("orders", "/orders/ORD-10001")
    assert len(shop.requests("GET")) == 1


async def test_a_path_argument_stays_one_segment(shop: Shop):
    for sneaky, sent in (
        ("../customers/CUS-1001", "GET /orders/%2E%2E%2Fcustomers%2FCUS-1001"),
        ("..", "GET /orders/%2E%2E"),
        ("ORD-10001?x=1#y", "GET /orders/ORD-10001%3Fx%3D1%23y"),
    ):
        with pytest.raises(ConnectorRefused) as refused:
            await shop.connectors.fetch("orders", "/orders/{order_id}", {"order_id": sneaky})
        assert refused.value.status == 404
        assert shop.faults.requests[-1] == sent
    with pytest.raises(ValueError, match="needs the argument 'order_id'"):
        await shop.connectors.perform(CANCEL, {"reason": "x"}, idempotency_key="c")
    with pytest.raises(ValueError, match="is empty"):
        await shop.connectors.perform(CANCEL, {"order_id": "", "reason": "x"}, idempotency_key="c")
    assert len(shop.requests("POST")) == 0


async def test_a_write_that_timed_out_after_committing_is_retried_with_its_key_and_done_once(shop: Shop):
    shop.faults.delay_after_commit_s = 3 * TIMEOUT_S
    shop.faults.delay_count = 1
    made = await shop.connectors.perform(REFUND, refund(1500, "late answer"), idempotency_key="rf-late")
    assert made["amount_cents"] == 1500
    assert len(shop.requests("POST")) == 2
    assert shop.refunds("late answer") == 1
    order = await shop.connectors.fetch("orders", "/orders/ORD-10019")
    assert order["refunded_cents"] == 27900 + 1500


async def test_a_write_that_never_answers_in_time_fails_after_its_retries_and_was_done_once(shop: Shop):
    shop.faults.delay_after_commit_s = 3 * TIMEOUT_S
    shop.faults.delay_count = 10
    with pytest.raises(ConnectorTimeout) as timeout:
        await shop.connectors.perform(REFUND, refund(700, "slow"), idempotency_key="rf-slow")
    assert str(timeout.value) == (
        "billing did not answer POST /orders/ORD-10019/refunds within 1 s (the change may have been made)"
    )
    assert isinstance(timeout.value, Unavailable) and timeout.value.dependency == "billing"
    assert len(shop.requests("POST")) == 3  # the first try and two retries
    assert shop.refunds("slow") == 1


async def test_a_write_without_a_key_is_sent_once(shop: Shop):
    blind = Operation("orders", "POST", "/orders/{order_id}/cancel", body=("reason",))
    shop.faults.delay_after_commit_s = 3 * TIMEOUT_S
    shop.faults.delay_count = 1
    with pytest.raises(ConnectorTimeout):
        await shop.connectors.perform(blind, {"order_id": "ORD-10003", "reason": "x"})
    assert len(shop.requests("POST")) == 1
    with pytest.raises(ValueError, match="needs an idempotency key"):
        await shop.connectors.perform(CANCEL, {"order_id": "ORD-10003", "reason": "x"})
    assert len(shop.requests("POST")) == 1


async def test_an_outage_is_retried_for_reads_and_keyed_writes(shop: Shop):
    shop.faults.unavailable_count = 2
    order = await shop.connectors.fetch("orders", "/orders/ORD-10003")
    assert order["status"] == "pending" and len(shop.requests("GET")) == 3
    shop.faults.unavailable_count = 1
    cancelled = await shop.connectors.perform(CANCEL, {"order_id": "ORD-10003", "reason": "x"}, idempotency_key="c1")
    assert cancelled["status"] == "cancelled" and len(shop.requests("POST")) == 2
    shop.faults.unavailable_count = 5
    with pytest.raises(ConnectorUnavailable) as unavailable:
        await shop.connectors.fetch("crm", "/customers/CUS-1001")
    assert unavailable.value.status == 503
    assert str(unavailable.value) == (
        "crm is unavailable for GET /customers/CUS-1001: 503 the system is unavailable (an injected fault)"
    )
    assert len(shop.requests("GET")) == 3 + 3


async def test_a_system_that_cannot_be_reached_is_unavailable():
    async with connectors_for(f"http://127.0.0.1:{free_port()}", retries=1) as nowhere:
        with pytest.raises(ConnectorUnavailable, match="orders cannot be reached for GET /orders/ORD-10001") as down:
            await nowhere.fetch("orders", "/orders/ORD-10001")
    assert isinstance(down.value, Unavailable) and down.value.reason == "orders_unavailable"


async def test_a_system_that_is_not_configured_is_an_error(shop: Shop):
    assert shop.connectors.systems == {"orders", "billing", "crm"}
    with pytest.raises(ConnectorError, match="no system named 'shipping' is configured"):
        await shop.connectors.fetch("shipping", "/parcels/1")
