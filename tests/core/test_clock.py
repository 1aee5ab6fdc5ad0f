"""The clocks: the system one, and the manual one replays and tests drive."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from vigil.core.clock import ManualClock, SystemClock


async def test_system_clock_is_aware_and_monotonic():
    clock = SystemClock()
    assert clock.now().tzinfo is not None
    before = clock.monotonic()
    await clock.sleep(0.01)
    assert clock.monotonic() > before


async def test_manual_clock_moves_only_when_told():
    start = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
    clock = ManualClock(start)
    sleeper = asyncio.create_task(clock.sleep(60))
    await asyncio.sleep(0.01)
    assert not sleeper.done() and clock.now() == start
    clock.advance(30)
    await asyncio.sleep(0.01)
    assert not sleeper.done()
    clock.advance_to(start + timedelta(minutes=2))
    await asyncio.wait_for(sleeper, 1)
    assert clock.now() == start + timedelta(minutes=2) and clock.monotonic() == 120
    clock.advance_to(start)  # the past: nothing happens
    assert clock.now() == start + timedelta(minutes=2)


def test_manual_clock_refuses_naive_times_and_going_back():
    with pytest.raises(ValueError):
        ManualClock(datetime(2026, 11, 2))
    with pytest.raises(ValueError):
        ManualClock(datetime(2026, 11, 2, tzinfo=UTC)).advance(-1)
