"""How long the event loop goes without a turn: a small task that sleeps a fixed interval and records how late it
woke.

Everything vigil does for events, timers, health checks and HTTP shares one event loop, so a step that holds it (a
CPU-heavy call made inline, a synchronous read, a full garbage collection) delays everything else by as much. The
monitor sees such a stall as a late wake-up: if it asked to wake at *t* and woke at *t* + 80 ms, the loop was busy
for about 80 ms. Each lag is observed in ``vigil_event_loop_lag_seconds`` and the largest since start is kept in
``vigil_event_loop_lag_max_seconds`` (issue 24: never more than 50 ms under load; ``bench.quick`` reports both).

It reads the loop's own clock, never vigil's ``Clock``: what it measures is the machine's time, and a replay on
simulated time has no such thing as a late wake-up. Waking 20 times a second costs the loop a few microseconds each.
"""

from __future__ import annotations

import asyncio

from prometheus_client import Gauge, Histogram

DEFAULT_INTERVAL_S = 0.05


class LoopLagMonitor:
    """Records how late the running loop wakes the monitor, every ``interval_s``."""

    def __init__(self, lag: Histogram, largest: Gauge, *, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        """``lag`` observes each wake-up's lateness in seconds; ``largest`` holds the largest seen."""
        if interval_s <= 0:
            raise ValueError("the interval must be positive")
        self._lag = lag
        self._largest = largest
        self._interval_s = interval_s
        self.max_s = 0.0
        """The largest lag seen so far, in seconds."""

    def observe(self, lag_s: float) -> None:
        """Record one wake-up ``lag_s`` seconds late (a negative lateness, from a timer's rounding, counts as 0)."""
        lag_s = max(lag_s, 0.0)
        self._lag.observe(lag_s)
        if lag_s > self.max_s:
            self.max_s = lag_s
            self._largest.set(lag_s)

    async def run_forever(self) -> None:
        """Sleep, measure, repeat, until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self._interval_s
            await asyncio.sleep(self._interval_s)
            self.observe(loop.time() - due)
