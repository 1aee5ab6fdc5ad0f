"""The two phases of a vigil run: drain a full topic (throughput), then follow a paced stream (latency)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from bench import traffic
from bench.daemon import VigilProcess
from bench.linux import MachineTimes
from bench.metrics import Histogram, Snapshot
from bench.watcher import StoreWatcher

POLL_S = 0.1


@dataclass(frozen=True, slots=True)
class Throughput:
    """Events fully handled over a window that starts at the first one handled (after the group join)."""

    events: float
    seconds: float
    vigil_cores: float
    """vigil's CPU time over the window, in cores (1.0: one core busy all the time)."""
    machine_cores: float
    """Busy cores on the whole machine over the window: vigil, the broker, the database, the benchmark."""

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds


@dataclass(frozen=True, slots=True)
class Latency:
    """Processing time (vigil's histogram) and produce-to-stored time of events sent at a steady rate."""

    sent: int
    events_per_s: float
    processing: Histogram
    to_visible_s: list[float]
    to_received_s: list[float]
    vigil_cores: float
    machine_cores: float


async def drain(
    vigil: VigilProcess,
    expect: int,
    timeout_s: float,
    window: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext,
) -> Throughput:
    """Wait until vigil has handled ``expect`` events, timing from the first one handled; ``window`` is entered
    while the window is open (a profiler)."""
    async with asyncio.timeout(timeout_s):
        first = await until(vigil, lambda s: s.handled > 0)
        with window():
            started, cpu, machine = time.monotonic(), vigil.cpu_seconds(), MachineTimes.now()
            await until(vigil, lambda s: s.handled >= expect)
            seconds = time.monotonic() - started
    return Throughput(
        events=expect - first.handled,
        seconds=seconds,
        vigil_cores=(vigil.cpu_seconds() - cpu) / seconds,
        machine_cores=MachineTimes.now().busy_cores_since(machine),
    )


async def follow(
    vigil: VigilProcess,
    *,
    db_url: str,
    bootstrap: str,
    topic: str,
    events: Iterator[traffic.Event],
    rate: float,
    duration_s: float,
) -> Latency:
    """Send ``events`` at ``rate`` for ``duration_s`` while vigil runs; measure until all are handled."""
    before = await vigil.snapshot()
    watcher = StoreWatcher(db_url)
    watcher.start()
    cpu, machine = vigil.cpu_seconds(), MachineTimes.now()
    try:
        sent, seconds = await traffic.produce_paced(bootstrap, topic, events, rate=rate, duration_s=duration_s)
        vigil_cores = (vigil.cpu_seconds() - cpu) / seconds
        machine_cores = MachineTimes.now().busy_cores_since(machine)
        async with asyncio.timeout(duration_s + 60):
            after = await until(vigil, lambda s: s.handled >= before.handled + sent)
    finally:
        watcher.stop()
    return Latency(
        sent=sent,
        events_per_s=sent / seconds,
        processing=after.processing - before.processing,
        to_visible_s=watcher.to_visible_s,
        to_received_s=watcher.to_received_s,
        vigil_cores=vigil_cores,
        machine_cores=machine_cores,
    )


async def until(vigil: VigilProcess, done: Callable[[Snapshot], bool]) -> Snapshot:
    """vigil's counters as soon as ``done`` holds for them (read every ``POLL_S``)."""
    while True:
        snapshot = await vigil.snapshot()
        if done(snapshot):
            return snapshot
        await asyncio.sleep(POLL_S)
