"""The demo's live traffic: the bundled conversations, each played once per run, re-stamped with fresh ids and times,
with new customers (another name in each conversation on each run) and new wording, at a steady pace.

Once per run, not round after round: a demo that replayed the same chats in a loop piled up copies of one scripted
conversation, and a user watching the miner learn FAQs from them learnt the wrong thing about vigil (the miner counts
a copy once in any case: vigil/mining/merge.py). After the last one the demo stays up, quiet, for your own traffic
(`vigil send`).

The wording changes too: beside ``conversations.jsonl`` lies ``conversations.rewordings.jsonl``, other ways of
writing each customer's and analyst's message (the same facts, amounts, times and promises, as another person would
type them), and each run picks one wording per message, so two runs tell the same stories in different words."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import re
import sys
import uuid
from collections.abc import Mapping, Sequence
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


def rewordings_of(conversations: Path) -> Path:
    """Where the other wordings of ``conversations`` lie: ``NAME.rewordings.jsonl`` beside ``NAME.jsonl``."""
    return conversations.with_suffix(".rewordings.jsonl")


def load_rewordings(path: Path) -> dict[str, list[str]]:
    """Each message id in ``path`` and its other wordings (none when there is no such file)."""
    if not path.is_file():
        return {}
    rows = (json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip())
    return {str(row["message_id"]): [str(text) for text in row["texts"]] for row in rows}


def load_conversations(path: Path) -> list[list[dict[str, Any]]]:
    """The events of each conversation in ``path``, in file order."""
    events = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    return [list(group) for _, group in groupby(events, key=lambda e: e["conversation_id"])]


CUSTOMERS = (
    "Amara Okoye",
    "Ben Hartley",
    "Carys Evans",
    "Dev Patel",
    "Eilidh Fraser",
    "Farah Siddiqui",
    "George Whitmore",
    "Hana Kowalski",
    "Isaac Mensah",
    "Jess Turnbull",
    "Kofi Boateng",
    "Lucy Marsh",
    "Mohammed Rahman",
    "Niamh Byrne",
    "Oliver Grant",
    "Poppy Shaw",
    "Rhys Morgan",
    "Sana Iqbal",
    "Tomasz Nowak",
    "Una McKenna",
    "Victor Adeyemi",
    "Willow Hayes",
    "Yusuf Karim",
    "Zoe Lambert",
    "Arjun Mehta",
    "Bronwen Price",
    "Conor Doyle",
    "Daisy Fletcher",
)
"""The names a run gives the demo's customers: each run its own shuffle of them."""


class DemoTraffic:
    """Plays conversations as a chat platform would, several at once, each once, with new customers and, where
    ``rewordings`` has them, one of a message's wordings."""

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
        rewordings: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self._conversations = conversations
        self._rewordings = rewordings or {}
        self._publisher = publisher
        self._topic = topic
        self._clock = clock
        self._backoff = backoff
        self._pace_s = pace_s
        self._slots = asyncio.Semaphore(parallel)

    async def run(self, run: str | None = None) -> None:
        """Publish each conversation once (with the publisher started already: the demo's tidying uses it first),
        its customer renamed for run ``run`` (default: a new one)."""
        run = run or uuid.uuid4().hex[:6]
        names = renamed(self._conversations, run)
        tasks = [asyncio.create_task(self._play(events, run, names)) for events in self._conversations]
        await asyncio.gather(*tasks)
        log.info("demo traffic: %d conversations played, each once; send your own with `vigil send`", len(tasks))

    async def _play(self, events: list[dict[str, Any]], tag: str, names: dict[str, str]) -> None:
        async with self._slots:
            for event in events:
                await self._clock.sleep(self._pace_s * random.uniform(0.5, 1.5))
                fresh = self._restamp(_with_names(reworded(event, self._rewordings, tag), names), tag)
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


def renamed(conversations: list[list[dict[str, Any]]], run: str) -> dict[str, str]:
    """For run ``run``, each customer of ``conversations`` (by name) and the name they get: another for each
    customer, the same for the same run."""
    customers = sorted(
        {e["author"] for c in conversations for e in c if e.get("role") == "customer" and e.get("author")}
    )
    pool = list(CUSTOMERS)
    random.Random(run).shuffle(pool)
    return {old: pool[n % len(pool)] for n, old in enumerate(customers)}


def reworded(event: dict[str, Any], rewordings: Mapping[str, Sequence[str]], run: str) -> dict[str, Any]:
    """``event`` in the wording run ``run`` gives it: the script's or one of its ``rewordings``, the same for the same
    run and message."""
    others = rewordings.get(str(event.get("message_id")))
    if not others:
        return event
    return event | {"text": random.Random(f"{run}/{event['message_id']}").choice([event["text"], *others])}


def _with_names(event: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """``event`` with each customer's name replaced, as author and in its text (a greeting says the first name)."""
    fresh = dict(event)
    if fresh.get("author") in names:
        fresh["author"] = names[fresh["author"]]
    text = fresh.get("text")
    if isinstance(text, str):
        for old, new in names.items():
            text = re.sub(rf"\b{re.escape(old)}\b", new, text)
            text = re.sub(rf"\b{re.escape(old.split()[0])}\b", new.split()[0], text)
        fresh["text"] = text
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
