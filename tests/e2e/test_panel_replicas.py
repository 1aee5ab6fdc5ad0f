"""Two replicas in one consumer group on PostgreSQL: a panel on either sees every conversation live."""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx
import pytest

from tests.conftest import Topics, create_topics
from tests.e2e.harness import VigilCli, VigilProcess, eventually, message, ready, record
from tests.kafka_client import produce
from tests.sse import sse_events
from vigil.dev.broker import EmbeddedBroker

pytestmark = pytest.mark.e2e


def consumed(replica: VigilProcess) -> float:
    return replica.metric("vigil_events_consumed_total", type="message")


async def live_message_ids(url: str, into: set[str], connected: asyncio.Event) -> None:
    """Follow ``url``'s live stream, collecting the ids of the messages it announces."""
    async with httpx.AsyncClient(timeout=None) as client, client.stream("GET", url + "/api/live") as stream:
        async for kind, data in sse_events(stream):
            connected.set()
            if kind == "message":
                into.add(json.loads(data)["message"]["message_id"])


async def test_a_panel_on_one_replica_sees_what_the_other_replica_handles(
    vigil: VigilCli, kafka: EmbeddedBroker, topics: Topics, pg_url: str
) -> None:
    await create_topics(kafka.bootstrap, topics)
    first = vigil.daemon(kafka.bootstrap, topics, pg_url)
    await ready(first, timeout_s=60)
    second = vigil.daemon(kafka.bootstrap, topics, pg_url, VIGIL_DATA_DIR=str(vigil.tmp_path / "data-2"))
    await ready(second, timeout_s=60)

    # Until the group has split the partitions, keep talking: both replicas must end up handling conversations.
    warm = 0

    def both_busy() -> bool:
        nonlocal warm
        warm += 1
        produce(
            kafka.bootstrap, topics.input, [record(message(f"warm-{warm}-{n}", f"warm-{warm}-{n}-m")) for n in range(6)]
        )
        return consumed(first) > 0 and consumed(second) > 0

    await eventually("both replicas handling conversations", both_busy, 60, second)

    seen: set[str] = set()
    connected = asyncio.Event()
    follower = asyncio.create_task(live_message_ids(first.base_url, seen, connected))
    try:
        await asyncio.wait_for(connected.wait(), 10)
        before = consumed(second)
        sent = [f"live-{uuid.uuid4().hex[:6]}-{n}" for n in range(24)]
        produce(kafka.bootstrap, topics.input, [record(message(c, f"{c}-m1", "hello")) for c in sent])
        await eventually("every message on the first replica's stream", lambda: {f"{c}-m1" for c in sent} <= seen, 30)
        assert consumed(second) > before, "the second replica handled none of them: nothing was relayed"
    finally:
        follower.cancel()
        await asyncio.gather(follower, return_exceptions=True)
