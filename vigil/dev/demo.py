"""The demo's live traffic: the bundled conversations, re-stamped with fresh ids and times, at a steady pace."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import sys
import uuid
from functools import partial
from importlib import resources
from itertools import groupby
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from vigil.cases.tables import CONVERSATION
from vigil.cases.views import CaseViews
from vigil.core.clock import Clock
from vigil.core.retry import Backoff
from vigil.transport.kafka import KafkaPublisher

log = logging.getLogger(__name__)

_ID_FIELDS = ("message_id", "event_id", "feedback_id", "conversation_id")
TIDY_SUMMARY = "Left open by an earlier vigil demo run; closed when the demo started again."


def bundled_knowledge() -> Path:
    """The knowledge shipped with vigil: ``knowledge/`` in a checkout, else ``<prefix>/share/vigil/knowledge``."""
    checkout = Path(str(resources.files("vigil"))).parent / "knowledge"
    return checkout if checkout.is_dir() else Path(sys.prefix) / "share" / "vigil" / "knowledge"


def bundled_conversations() -> Path:
    """The demo conversations that ship with vigil (``knowledge/demo/conversations.jsonl``)."""
    return bundled_knowledge() / "demo" / "conversations.jsonl"


def load_conversations(path: Path) -> list[list[dict[str, Any]]]:
    """The events of each conversation in ``path``, in file order."""
    events = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    return [list(group) for _, group in groupby(events, key=lambda e: e["conversation_id"])]


class DemoTraffic:
    """Plays conversations as a chat platform would, several at once, round after round, forever."""

    def __init__(
        self,
        conversations: list[list[dict[str, Any]]],
        *,
        publisher: KafkaPublisher,
        topic: str,
        clock: Clock,
        backoff: Backoff,
        pace_s: float,
        parallel: int,
    ) -> None:
        self._conversations = conversations
        self._publisher = publisher
        self._topic = topic
        self._clock = clock
        self._backoff = backoff
        self._pace_s = pace_s
        self._slots = asyncio.Semaphore(parallel)

    async def run_forever(self) -> None:
        """Publish until cancelled, with the publisher started already (the demo's tidying uses it first)."""
        run = uuid.uuid4().hex[:6]
        round_no = 0
        while True:
            round_no += 1
            tasks = [asyncio.create_task(self._play(events, f"{run}-{round_no}")) for events in self._conversations]
            await asyncio.gather(*tasks)

    async def _play(self, events: list[dict[str, Any]], tag: str) -> None:
        async with self._slots:
            for event in events:
                await self._clock.sleep(self._pace_s * random.uniform(0.5, 1.5))
                fresh = self._restamp(event, tag)
                value = json.dumps(fresh, ensure_ascii=False).encode()
                key = fresh["conversation_id"].encode()
                await self._backoff.retry(
                    "publishing demo traffic", partial(self._publisher.send, self._topic, value, key)
                )
            log.info("demo conversation %s played", events[0]["conversation_id"])

    def _restamp(self, event: dict[str, Any], tag: str) -> dict[str, Any]:
        fresh = dict(event)
        for name in _ID_FIELDS:
            if name in fresh:
                fresh[name] = f"{fresh[name]}-{tag}"
        moment = self._clock.now().isoformat().replace("+00:00", "Z")
        fresh["sent_at" if fresh.get("type") == "message" else "at"] = moment
        return fresh


async def tidy_earlier_runs(
    conversations: list[list[dict[str, Any]]],
    *,
    views: CaseViews,
    publisher: KafkaPublisher,
    topic: str,
    clock: Clock,
) -> list[str]:
    """Close what earlier demo runs left open, so a restarted demo starts from a tidy queue; returns their ids.

    A run stopped mid-way leaves its conversations half-played, and each run plays with new ids (``ID-RUN-ROUND``).
    The cases are only read here: each close is a ``closed`` case event published to ``topic``, which the daemon
    records like any other, so the stream stays the one way into the database (docs/architecture.md).
    """
    played = {events[0]["conversation_id"]: events[0].get("tenant") for events in conversations}
    c = CONVERSATION.c
    prefixes = sa.or_(*(c.id.startswith(f"{cid}-", autoescape=True) for cid in played))
    async with views.reading() as conn:
        rows = (await conn.execute(sa.select(c.id, c.tenant).where(c.status != "closed", prefixes))).all()
    moment = clock.now().isoformat().replace("+00:00", "Z")
    for conversation_id, tenant in rows:
        event = {
            "type": "case",
            "schema_version": 1,
            "event_id": f"{conversation_id}-tidy",
            "conversation_id": conversation_id,
            "tenant": tenant,
            "at": moment,
            "event": "closed",
            "resolution": {"resolved_by": "bot", "summary": TIDY_SUMMARY},
        }
        await publisher.send(topic, json.dumps(event).encode(), conversation_id.encode())
    if rows:
        log.info("closed %d conversations earlier demo runs left open", len(rows))
    return [conversation_id for conversation_id, _ in rows]
