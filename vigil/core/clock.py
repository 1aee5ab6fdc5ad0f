"""The one clock everything time-based reads.

Nothing in vigil calls ``time.time()`` or ``datetime.now()`` directly: the daemon passes a ``Clock`` down, so
replays and tests can run on simulated time.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Wall-clock time (for timestamps) and monotonic time (for durations)."""

    def now(self) -> datetime:
        """The current time, timezone-aware, in UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back, for measuring durations."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""
        ...


class SystemClock:
    """The machine's clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class ManualClock:
    """A clock that moves only when told to: for replays driven by event timestamps, and for tests."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware start")
        self._now = start.astimezone(UTC)
        self._mono = 0.0
        self._moved = asyncio.Event()

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``."""
        if seconds < 0:
            raise ValueError("time does not go back")
        self._now += timedelta(seconds=seconds)
        self._mono += seconds
        self._moved.set()
        self._moved = asyncio.Event()

    def advance_to(self, moment: datetime) -> None:
        """Move time forward to ``moment`` (no-op if it is in the past)."""
        delta = (moment - self._now).total_seconds()
        if delta > 0:
            self.advance(delta)

    async def sleep(self, seconds: float) -> None:
        deadline = self._mono + seconds
        while self._mono < deadline:
            await self._moved.wait()
