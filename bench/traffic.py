"""Realistic v1 traffic: the demo conversations re-stamped as thousands of distinct, interleaved ones.

Each benchmark conversation copies one of the bundled demo conversations (customer, analyst, bot and system
messages of real length, with their case events) under fresh ids. Conversations start at random moments and
overlap, as on a busy support platform, so consecutive records mostly belong to different conversations.

Two mixes of them (``MIXES``): ``full``, every event of the demo conversations (43% of them customer messages), and
``non-questions``, the same conversations without their customer messages: analyst, bot and system messages and
case events only, none of which the answers capability reads beyond its first check. And ``analyst_stream``:
analyst messages alone, many to a conversation, as a team of analysts writes them (``bench.quick``'s ingest).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

TEMPLATES = Path(__file__).resolve().parent.parent / "knowledge" / "demo" / "conversations.jsonl"
_ID_FIELDS = {"message": "message_id", "case": "event_id"}
_TIME_FIELDS = {"message": "sent_at", "case": "at"}
MIXES = ("full", "non-questions")


@dataclass(frozen=True, slots=True)
class Event:
    """One v1 event waiting to be stamped and sent; ``offset_s`` is its time since the traffic began."""

    offset_s: float
    fields: dict[str, Any]

    @property
    def key(self) -> bytes:
        return str(self.fields["conversation_id"]).encode()

    def encode(self, at: datetime) -> bytes:
        """The wire record, with its time field set to ``at``."""
        stamped = self.fields | {_TIME_FIELDS[self.fields["type"]]: at.isoformat()}
        return json.dumps(stamped, ensure_ascii=False).encode()


def load_templates(path: Path = TEMPLATES) -> list[list[dict[str, Any]]]:
    """The demo conversations, each a list of its events (messages and case events) in order."""
    events = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    conversations: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        if event["type"] in _ID_FIELDS:
            conversations.setdefault(event["conversation_id"], []).append(event)
    return list(conversations.values())


def mixed(templates: list[list[dict[str, Any]]], mix: str) -> list[list[dict[str, Any]]]:
    """The templates of ``mix``: all of them as they are (``full``), or without customer messages
    (``non-questions``: what an answers-on vigil has no question to answer in)."""
    if mix == "full":
        return templates
    if mix == "non-questions":
        return [[e for e in template if e.get("role") != "customer"] for template in templates]
    raise ValueError(f"unknown mix {mix!r}; use one of {MIXES}")


def stream(*, conversations: int, prefix: str, seed: int, templates: list[list[dict[str, Any]]]) -> list[Event]:
    """``conversations`` conversations, interleaved in the order a platform would emit their events."""
    rng = random.Random(seed)
    window_s = 4 * 3600.0
    events: list[Event] = []
    for number in range(conversations):
        template = templates[number % len(templates)]
        events += _conversation(template, f"{prefix}-{number:05d}", rng.uniform(0, window_s), rng)
    events.sort(key=lambda e: e.offset_s)
    return events


def _conversation(
    template: list[dict[str, Any]], conversation_id: str, start_s: float, rng: random.Random
) -> list[Event]:
    moment = start_s
    out = []
    for index, original in enumerate(template):
        fields = dict(original)
        fields["conversation_id"] = conversation_id
        fields[_ID_FIELDS[fields["type"]]] = f"{conversation_id}-{index:03d}"
        fields.pop(_TIME_FIELDS[fields["type"]])
        out.append(Event(moment, fields))
        moment += rng.expovariate(1 / 45.0)  # a reply about every 45 s
    return out


def analyst_stream(*, conversations: int, per_conversation: int, prefix: str, seed: int) -> list[Event]:
    """Analyst messages only: ``conversations`` conversations of ``per_conversation`` messages each, their texts the
    demo's analyst messages in turn (promises, questions to the customer, notes, closings), interleaved as
    ``stream`` interleaves. What a team of analysts writes, with no customer message to answer."""
    texts = [e["text"] for template in load_templates() for e in template if e.get("role") == "analyst"]
    template = {"type": "message", "schema_version": 1, "tenant": "brightwave", "role": "analyst"}
    rng = random.Random(seed)
    events: list[Event] = []
    for number in range(conversations):
        conversation = f"{prefix}-{number:05d}"
        moment = rng.uniform(0, 4 * 3600.0)
        for index in range(per_conversation):
            text = texts[(number * per_conversation + index) % len(texts)]
            fields = template | {
                "conversation_id": conversation,
                "message_id": f"{conversation}-{index:03d}",
                "author": f"analyst-{number % 40}",
                "text": text,
            }
            events.append(Event(moment, fields))
            moment += rng.expovariate(1 / 45.0)
    events.sort(key=lambda e: e.offset_s)
    return events


async def produce_all(bootstrap: str, topic: str, events: list[Event], day: datetime) -> None:
    """Send every event as fast as the broker takes them; each is stamped with its time on ``day``."""
    producer = _producer(bootstrap, linger_ms=5)
    try:
        await producer.start()
        sends = [await producer.send(topic, e.encode(day + timedelta(seconds=e.offset_s)), key=e.key) for e in events]
        await asyncio.gather(*sends)
    finally:
        await producer.stop()


async def produce_paced(
    bootstrap: str, topic: str, events: Iterator[Event], *, rate: float, duration_s: float
) -> tuple[int, float]:
    """Send events at ``rate`` per second for ``duration_s``, each stamped with the moment it is sent.

    Returns how many were sent and over how many seconds (the achieved rate is their ratio).
    """
    producer = _producer(bootstrap, linger_ms=0)
    sent = 0
    sends: list[asyncio.Future[Any]] = []
    try:
        await producer.start()
        start = time.monotonic()
        while (elapsed := time.monotonic() - start) < duration_s:
            for _ in range(int(elapsed * rate) - sent):
                event = next(events)
                sends.append(await producer.send(topic, event.encode(datetime.now(UTC)), key=event.key))
                sent += 1
            await asyncio.sleep(0.002)
        await asyncio.gather(*sends)
        return sent, time.monotonic() - start
    finally:
        await producer.stop()


async def produce_burst(bootstrap: str, topic: str, events: Iterable[Event]) -> tuple[int, float]:
    """Send ``events`` as fast as the producer goes (a burst), each stamped with the moment it is handed over.

    Returns how many were sent and how long it took until the broker had them all."""
    producer = _producer(bootstrap, linger_ms=2)
    try:
        await producer.start()
        start = time.monotonic()
        sends = [await producer.send(topic, event.encode(datetime.now(UTC)), key=event.key) for event in events]
        await asyncio.gather(*sends)
        return len(sends), time.monotonic() - start
    finally:
        await producer.stop()


def _producer(bootstrap: str, *, linger_ms: int) -> AIOKafkaProducer:
    return AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=False,  # Tansu cannot do InitProducerId
        linger_ms=linger_ms,
    )
