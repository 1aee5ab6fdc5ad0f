"""Transports: where events come from (sources) and where suggestions go (sinks).

A source yields ``Delivery`` objects: one raw record each, with a way to acknowledge it once it is fully handled
(stored, published, or dead-lettered) and a way to dead-letter it on the transport it came from. A sink publishes
suggestions. Kafka and MQTT implement these; the pipeline never sees which one it is talking to.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass, field
from typing import Literal, Protocol

from vigil.core.errors import Rejected
from vigil.wire.events import Suggestion


@dataclass(frozen=True, slots=True)
class Tenure:
    """A consumer's hold on a partition, for as long as the group leaves it there: ``epoch`` is counted up in the
    database each time any consumer is given the partition, so that a write made under an older epoch (by a consumer
    the group has since moved on from, stalled or cut off, that does not know it yet) is refused (fencing)."""

    scope: str
    """The partition held (``kafka:<topic>/<partition>``)."""
    epoch: int


class TenureBook(Protocol):
    """Where tenures are counted (vigil/flow/tenure.py keeps them in the database)."""

    async def take(self, scopes: Collection[str]) -> dict[str, Tenure]:
        """A new tenure of each scope for this consumer, fencing off every earlier one.

        Raises:
            StoreUnavailable: the database cannot be reached (retry).
        """
        ...


@dataclass(frozen=True, slots=True)
class Record:
    """One raw input record, exactly as the transport delivered it."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()
    origin: dict[str, str] = field(default_factory=dict)
    """Where it came from (for Kafka: topic, partition, offset), copied into dead-letter headers."""
    tenant: str | None = None
    """The tenant the transport's addressing names (an MQTT topic level), if any."""
    conversation_id: str | None = None
    """The conversation the transport's addressing names (an MQTT topic level, a Kafka key), if any."""
    tenure: Tenure | None = None
    """The consumer's hold on the record's partition when it was read, which its writes prove (Kafka); None where
    a record cannot move to another consumer while in flight (MQTT, memory)."""


DLQ_DETAIL_MAX_BYTES = 1024


def dead_letter_headers(record: Record, rejection: Rejected) -> list[tuple[str, str]]:
    """What a dead letter carries besides the record's own headers, on any transport: why it was rejected (the
    detail cut to ``DLQ_DETAIL_MAX_BYTES``), and where it came from (``vigil.source.*``)."""
    detail = rejection.detail.encode("utf-8", "replace")[:DLQ_DETAIL_MAX_BYTES].decode("utf-8", "ignore")
    return [
        ("vigil.dlq.reason", rejection.reason),
        ("vigil.dlq.detail", detail),
        *((f"vigil.source.{k}", v) for k, v in record.origin.items()),
    ]


def truncation_headers(record: Record, dropped: Literal["value", "record"]) -> list[tuple[str, str]]:
    """What a dead letter too large for its destination says of what it left out: ``value`` when the value is cut,
    ``record`` when only vigil's headers are left (no key, value or headers of the record's own); and how many bytes
    the record's value had."""
    return [("vigil.dlq.truncated", dropped), ("vigil.dlq.original_size", str(len(record.value or b"")))]


class Delivery(Protocol):
    """A record in flight, with its acknowledgement handle."""

    @property
    def record(self) -> Record: ...

    def ack(self) -> None:
        """The record is fully handled; the transport may forget it (commit its offset, ack the packet)."""
        ...

    def on_withdrawn(self, stop: Callable[[], None]) -> None:
        """Call ``stop`` if the transport takes the record back while it is in flight: its partition was given to
        another consumer, which reads it again, and this one must not go on with it (never, on MQTT and memory)."""
        ...

    async def dead_letter(self, rejection: Rejected) -> None:
        """Put the record, unchanged if it fits, on the transport's dead-letter destination with the reason.

        Raises:
            RecordRefused: the destination refuses even the smallest dead letter (do not retry).
            TransportError: the dead-letter destination could not be written (retry).
        """
        ...


class Source(Protocol):
    """A stream of input records."""

    name: str

    async def start(self) -> None:
        """Connect. Raises ``TransportError`` when the broker cannot be reached (the caller retries)."""
        ...

    def deliveries(self) -> AsyncIterator[Delivery]:
        """Records as they arrive, until ``stop_intake`` is called."""
        ...

    def stop_intake(self) -> None:
        """Stop fetching; ``deliveries`` ends soon after."""
        ...

    async def check(self) -> None:
        """Raise ``TransportError`` unless the broker answers now."""
        ...

    async def close(self) -> None:
        """Acknowledge what is done (commit offsets) and disconnect."""
        ...


class Sink(Protocol):
    """A destination for suggestions."""

    name: str

    async def start(self) -> None: ...

    async def publish(self, suggestion: Suggestion) -> None:
        """Publish one suggestion. Raises ``TransportError`` when it could not be delivered (retry)."""
        ...

    async def close(self) -> None: ...


class Outbox(Protocol):
    """Puts an event vigil itself produces (an analyst's feedback from the panel) on the input stream."""

    name: str

    async def submit(self, value: bytes, *, tenant: str, conversation_id: str) -> None:
        """Publish one v1 event record where the conversation's events go, and wait until the broker has it.

        Raises:
            TransportError: it could not be delivered now (the caller may retry or report it).
        """
        ...
