"""Publishing v1 events from a JSONL file to the input topic (`vigil replay`, and the demo's traffic)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from vigil.clock import Clock
from vigil.transport.kafka import KafkaPublisher


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a JSONL file, published as it is; keyed by its conversation id when it has one."""

    number: int
    value: bytes
    key: bytes | None


def read_lines(path: Path) -> Iterator[Line]:
    """The non-blank lines of ``path``, unchanged (a malformed line is still published: vigil dead-letters it)."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            value = raw.rstrip(b"\r\n")
            if value.strip():
                yield Line(number, value, conversation_key(value))


def conversation_key(value: bytes) -> bytes | None:
    """The Kafka key for a record: its ``conversation_id``, so a conversation stays on one partition."""
    try:
        obj = json.loads(value)
    except ValueError:
        return None
    if isinstance(obj, dict) and isinstance(obj.get("conversation_id"), str):
        return str(obj["conversation_id"]).encode()
    return None


async def replay(path: Path, *, publisher: KafkaPublisher, topic: str, clock: Clock, rate: float = 0.0) -> int:
    """Publish every line of ``path`` to ``topic`` in order, at most ``rate`` per second (0: no limit)."""
    sent = 0
    start = clock.monotonic()
    for line in read_lines(path):
        if rate > 0:
            due = start + sent / rate
            wait = due - clock.monotonic()
            if wait > 0:
                await clock.sleep(wait)
        await publisher.send(topic, line.value, line.key)
        sent += 1
    return sent
