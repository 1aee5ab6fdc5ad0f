"""Crashes in process, for tests: a pipeline stopped at a named failpoint (vigil/core/faults.py), as a crash there
would leave the database, before the same event is redelivered to a fresh pipeline on the same database.

The failpoint raises an injected database error; the pipeline's retry then waits on the ``ManualClock``, which
never moves, and the pipeline is stopped there. The kill -9 tests do the same with a real process.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from vigil.app.settings import Settings
from vigil.core import faults
from vigil.core.clock import ManualClock
from vigil.flow.skills import Skill
from vigil.testing import wired
from vigil.wire.events import Event


async def until(check: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Wait until ``check()`` holds, at most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


async def crash_at(
    point: str,
    directory: Path,
    event: Event,
    *,
    settings: Settings,
    clock: ManualClock,
    skills: Sequence[Skill] = (),
) -> None:
    """Send ``event`` to a pipeline that dies at ``point`` the first time it gets there (``settings`` should have a
    short ``graceful_timeout_s``: the pipeline is drained for that long before it is stopped)."""
    faults.configure(f"{point}=db_error")
    try:
        async with wired(directory, settings=settings, clock=clock, skills=skills) as doomed:
            sending = asyncio.create_task(doomed.send(event))
            await until(lambda: doomed.sample("vigil_retries_total", dependency="database") > 0)
            sending.cancel()
    finally:
        faults.configure("")
