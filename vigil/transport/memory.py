"""In-process transport: records from memory or a file, suggestions and dead letters kept in lists.

Runs the real pipeline without a broker (replay evaluations, tests).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field

from vigil.core.errors import Rejected
from vigil.transport.base import Record
from vigil.wire.events import Suggestion


@dataclass(slots=True)
class MemoryDelivery:
    """A record from memory; ``acked`` tells whether it was fully handled."""

    record: Record
    source: MemorySource
    acked: bool = False

    def ack(self) -> None:
        self.acked = True
        self.source.acked.append(self.record)
        self.source._acking.set()

    async def dead_letter(self, rejection: Rejected) -> None:
        self.source.dead_letters.append((self.record, rejection))

    def on_withdrawn(self, stop: Callable[[], None]) -> None:
        """A record in memory is never taken back."""


@dataclass
class MemorySource:
    """Yields the records put into it, in order; ends when ``stop_intake`` is called or, if ``finite``, when empty."""

    finite: bool = True
    name: str = "memory"
    acked: list[Record] = field(default_factory=list)
    dead_letters: list[tuple[Record, Rejected]] = field(default_factory=list)
    _queue: asyncio.Queue[Record | None] = field(default_factory=asyncio.Queue)
    _stopped: bool = False
    _acking: asyncio.Event = field(default_factory=asyncio.Event)

    def put(self, records: Iterable[Record]) -> None:
        """Add records to the stream."""
        for record in records:
            self._queue.put_nowait(record)

    async def start(self) -> None:
        """Nothing to connect."""

    async def acknowledged(self, count: int) -> None:
        """Return once ``count`` records in all have been acknowledged (handled, or dead-lettered)."""
        while len(self.acked) < count:
            self._acking.clear()
            await self._acking.wait()

    async def deliveries(self) -> AsyncIterator[MemoryDelivery]:
        while not self._stopped:
            if self.finite and self._queue.empty():
                return
            record = await self._queue.get()
            if record is None:
                return
            yield MemoryDelivery(record, self)

    def stop_intake(self) -> None:
        self._stopped = True
        self._queue.put_nowait(None)

    async def check(self) -> None:
        """Always reachable."""

    async def close(self) -> None:
        """Nothing to close."""


@dataclass
class MemorySink:
    """Keeps every suggestion published to it."""

    name: str = "memory"
    published: list[Suggestion] = field(default_factory=list)

    async def start(self) -> None:
        """Nothing to connect."""

    async def publish(self, suggestion: Suggestion) -> None:
        self.published.append(suggestion)

    async def close(self) -> None:
        """Nothing to close."""


@dataclass
class MemoryOutbox:
    """Keeps every event submitted to it, as (tenant, conversation id, value)."""

    name: str = "memory"
    submitted: list[tuple[str, str, bytes]] = field(default_factory=list)

    async def submit(self, value: bytes, *, tenant: str, conversation_id: str) -> None:
        self.submitted.append((tenant, conversation_id, value))
