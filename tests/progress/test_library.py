"""The procedures' library: mined from the resolved cases on the scheduler, and not mined again when no case was
resolved, closed or changed since (a chat room's replay mined every simulated hour, thousands of times over the
same cases)."""

from __future__ import annotations

from pathlib import Path

from tests.progress.test_next_step import resolved_cases
from tests.progress.test_skill import T0, at, change, settings
from vigil.core.clock import ManualClock
from vigil.progress.library import Library
from vigil.testing import wired


async def test_procedures_are_mined_again_only_when_a_case_was_resolved_closed_or_changed(tmp_path: Path):
    async with wired(tmp_path, settings=settings(tmp_path), clock=ManualClock(T0)) as vigil:
        library = Library(vigil.views.engine, clock=vigil.clock, refresh_s=0.0, window=100, min_cases=1)
        await resolved_cases(vigil, 3)
        assert await library.mine(at(30)) == {"acme": 1}
        assert (await library.procedures("acme"))["address_change"].cases == 3
        assert await library.mine(at(90)) == {}  # nothing new: the same procedures, not mined again

        await resolved_cases(vigil, 4)  # done-3 closes: a fourth case
        assert await library.mine(at(150)) == {"acme": 1}
        assert (await library.procedures("acme"))["address_change"].cases == 4

        await vigil.send(change(100, "reopened", 40, "done-0"))  # one fewer resolved case
        assert await library.mine(at(210)) == {"acme": 1}
        assert (await library.procedures("acme"))["address_change"].cases == 3
        # Another replica, which has not mined yet, mines whatever this one did.
        other = Library(vigil.views.engine, clock=vigil.clock, refresh_s=0.0, window=100, min_cases=1)
        assert await other.mine(at(270)) == {"acme": 1}
