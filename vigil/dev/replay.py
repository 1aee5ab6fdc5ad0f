"""Publishing v1 events from a JSONL file to the input topic (`vigil replay`, and the demo's traffic)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from vigil.core.clock import Clock
from vigil.core.errors import Rejected
from vigil.flow.settings import IngestSettings
from vigil.transport.kafka import KafkaPublisher
from vigil.wire.events import parse


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a JSONL file, published as it is; keyed by its conversation id when it has one."""

    number: int
    value: bytes
    key: bytes | None


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line that is not a v1 event vigil would take: its number, and why (the reason vigil would dead-letter it)."""

    number: int
    reason: str
    detail: str


@dataclass
class Replayed:
    """What a replay did: how many lines it published, and the lines it did not because they are not v1 events."""

    sent: int = 0
    bad: list[BadLine] = field(default_factory=list)


def read_lines(path: Path) -> Iterator[Line]:
    """The non-blank lines of ``path``, unchanged."""
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


async def replay(
    path: Path,
    *,
    publisher: KafkaPublisher,
    topic: str,
    clock: Clock,
    rate: float = 0.0,
    checked: IngestSettings | None = None,
) -> Replayed:
    """Publish every line of ``path`` to ``topic`` in order, at most ``rate`` per second (0: no limit).

    With ``checked``, each line is decoded first as vigil's ingest would, under its limits: a line it would
    dead-letter is not published but reported. Without it every line is published as it is (to try the
    dead-letter topic on purpose).
    """
    done = Replayed()
    start = clock.monotonic()
    for line in read_lines(path):
        if checked is not None:
            try:
                parse(line.value, max_event_bytes=checked.max_event_bytes, max_text_bytes=checked.max_text_bytes)
            except Rejected as rejected:
                done.bad.append(BadLine(line.number, rejected.reason, rejected.detail))
                continue
        if rate > 0:
            due = start + done.sent / rate
            wait = due - clock.monotonic()
            if wait > 0:
                await clock.sleep(wait)
        await publisher.send(topic, line.value, line.key)
        done.sent += 1
    return done
