"""The event loop's lag monitor: a stall of the loop shows as a late wake-up, in the histogram and the maximum."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from prometheus_client import CollectorRegistry

from vigil.core.loop_lag import LoopLagMonitor
from vigil.core.metrics import Metrics


def _monitor(interval_s: float = 0.01) -> tuple[LoopLagMonitor, CollectorRegistry]:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    return LoopLagMonitor(metrics.loop_lag, metrics.loop_lag_max, interval_s=interval_s), registry


def test_each_lag_is_observed_and_the_largest_kept():
    monitor, registry = _monitor()
    for lag in (0.002, 0.3, 0.04, -0.0001):
        monitor.observe(lag)
    assert registry.get_sample_value("vigil_event_loop_lag_seconds_count") == 4
    assert registry.get_sample_value("vigil_event_loop_lag_seconds_bucket", {"le": "0.001"}) == 1  # the -0.0001
    assert registry.get_sample_value("vigil_event_loop_lag_seconds_bucket", {"le": "0.05"}) == 3
    assert registry.get_sample_value("vigil_event_loop_lag_max_seconds") == pytest.approx(0.3)
    assert monitor.max_s == pytest.approx(0.3)


async def test_a_blocked_loop_shows_as_a_late_wake_up():
    monitor, registry = _monitor(interval_s=0.01)
    watching = asyncio.create_task(monitor.run_forever())
    try:
        await asyncio.sleep(0.05)  # a few wake-ups on time
        time.sleep(0.2)  # holds the loop, as a synchronous call made on it would
        await asyncio.sleep(0.05)
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
    # It slept 0.01 s and could not wake before the 0.2 s stall ended: at least 0.19 s late.
    assert monitor.max_s >= 0.15
    assert registry.get_sample_value("vigil_event_loop_lag_max_seconds") == monitor.max_s
    assert registry.get_sample_value("vigil_event_loop_lag_seconds_bucket", {"le": "0.1"}) < (
        registry.get_sample_value("vigil_event_loop_lag_seconds_count")
    )


def test_the_interval_must_be_positive():
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    with pytest.raises(ValueError):
        LoopLagMonitor(metrics.loop_lag, metrics.loop_lag_max, interval_s=0)
