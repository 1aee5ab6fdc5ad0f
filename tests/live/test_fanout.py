"""Live updates between replicas through a real PostgreSQL's LISTEN/NOTIFY."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import psycopg
import pytest

from tests.conftest import wait_for
from vigil.core.clock import SystemClock
from vigil.core.metrics import Metrics
from vigil.core.retry import Backoff
from vigil.flow.feed import LiveFeed, Subscriber, Update
from vigil.live.fanout import APPLICATION_NAME, MAX_PAYLOAD_BYTES, Fanout, decode, encode


def update(text: str = "hello", conversation: str = "c-1", tenant: str = "acme") -> Update:
    message = {"message_id": "m-1", "sent_at": "2026-11-30T09:00:00+00:00", "role": "customer", "text": text}
    return Update("message", tenant, conversation, {"case": {"conversation_id": conversation}, "message": message})


class Replica:
    def __init__(self, url: str, registry) -> None:  # type: ignore[no-untyped-def]
        self.feed = LiveFeed()
        self.fanout = Fanout(url, self.feed, backoff=Backoff(SystemClock(), Metrics(registry), 0.05, 0.5))
        self.feed.relay = self.fanout.send


@pytest.fixture
async def replicas(pg_url: str) -> AsyncIterator[tuple[Replica, Replica]]:
    from prometheus_client import CollectorRegistry

    pair = (Replica(pg_url, CollectorRegistry()), Replica(pg_url, CollectorRegistry()))
    for replica in pair:
        replica.fanout.start()
    try:
        for replica in pair:
            await asyncio.wait_for(replica.fanout.connected.wait(), 10)
        yield pair
    finally:
        for replica in pair:
            await replica.fanout.close()


async def next_update(watcher: Subscriber, timeout_s: float = 5.0) -> Update:
    return await asyncio.wait_for(anext(aiter(watcher)), timeout_s)


async def test_an_update_on_one_replica_reaches_the_watchers_of_the_other_once(replicas: tuple[Replica, Replica]):
    a, b = replicas
    with a.feed.watch(tenants=None) as here, b.feed.watch(tenants=("acme",)) as there:
        b_other_tenant = b.feed.watch(tenants=("globex",))
        with b_other_tenant as elsewhere:
            a.feed.publish(update("is my refund through?"))
            assert (await next_update(there)).data["message"]["text"] == "is my refund through?"
            assert (await next_update(here)).data["message"]["text"] == "is my refund through?"
            a.feed.publish(update("second"))
            assert (await next_update(here)).data["message"]["text"] == "second"  # not its own echo first
            assert (await next_update(there)).data["message"]["text"] == "second"
            assert elsewhere.queue.empty()


async def test_a_message_too_long_for_notify_arrives_cut_and_marked(replicas: tuple[Replica, Replica]):
    a, b = replicas
    long_text = "ü€" * 6000 + '"\\'  # multibyte and escaped characters, ~24 KB
    with b.feed.watch(tenants=None) as there:
        a.feed.publish(update(long_text))
        got = (await next_update(there)).data["message"]
    assert got["truncated"] is True and long_text.startswith(got["text"]) and 1000 < len(got["text"]) < len(long_text)


def test_payloads_fit_and_foreign_ones_are_ignored():
    for text in ("short", "x" * 20_000, '"' * 20_000, "\n" * 9000, "😀" * 5000):
        payload = encode(update(text), "o1")
        assert len(payload.encode()) <= MAX_PAYLOAD_BYTES
        if len(text) > 5000:  # cut close to the limit, not anywhere below it
            assert len(payload.encode()) > MAX_PAYLOAD_BYTES - 200
        origin, back = decode(payload) or ("", None)
        assert origin == "o1" and back is not None and text.startswith(back.data["message"]["text"])
    assert decode("not json") is None and decode(json.dumps({"k": "message"})) is None


async def test_the_relay_reconnects_after_its_connection_is_killed(replicas: tuple[Replica, Replica], pg_url: str):
    a, b = replicas
    admin = pg_url.replace("postgresql+asyncpg", "postgresql")
    with psycopg.connect(admin, autocommit=True) as conn:
        killed = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = %s AND datname = current_database()",  # not another test run's replicas
            (APPLICATION_NAME,),
        ).fetchall()
    assert len(killed) == 2
    await wait_for(lambda: a.fanout.connections == b.fanout.connections == 2, 10)
    for replica in replicas:
        await asyncio.wait_for(replica.fanout.connected.wait(), 10)
    with b.feed.watch(tenants=None) as there:
        a.feed.publish(update("after the outage"))
        assert (await next_update(there)).data["message"]["text"] == "after the outage"
