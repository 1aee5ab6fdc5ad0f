"""The progress keeper writes a case's timers, commitments and reading in the transaction that records the event, so
that no crash falls between them: a promise made just before a crash is recorded once with its reminder, and a
``closed`` event always stops the case's timers and promises. Large messages take bounded time. On the real
pipeline (vigil.testing.wired), SQLite and PostgreSQL, with crashes simulated at the failpoints."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.failpoints import crash_at
from tests.progress.test_skill import T0, at, change, say
from tests.progress.test_skill import settings as progress_settings
from vigil.app.settings import Settings
from vigil.cases import timers
from vigil.cases.tables import COMMITMENT
from vigil.cases.timers import Arm
from vigil.core.clock import ManualClock
from vigil.testing import Wired, wired

ISSUE = say(1, "customer", "Is there a fault on my line?", 0)
PROMISE = say(2, "analyst", "I'll call you back by 5pm with what engineering says.", 1)
CLOSED = change(3, "closed", 5, resolution={"resolved_by": "human"})


def settings(tmp_path: Path, db_url: str) -> Settings:
    """The progress tests' settings, drained briefly (a pipeline stopped at a failpoint is not waited for)."""
    return progress_settings(tmp_path, db_url).model_copy(update={"graceful_timeout_s": 0.2})


def follow_ups(vigil: Wired) -> list[str]:
    return [s.text.split(":")[0] for s in vigil.published if s.kind == "follow_up"]


@pytest.mark.parametrize("point", ["event.after_record", "skill.after:progress"])
async def test_a_promise_made_just_before_a_crash_is_recorded_once_with_its_reminder(
    db_url: str, tmp_path: Path, point: str
):
    config = settings(tmp_path, db_url)
    async with wired(tmp_path, settings=config, clock=ManualClock(T0)) as first:
        await first.send(ISSUE)
    await crash_at(point, tmp_path, PROMISE, settings=config, clock=ManualClock(at(1)))
    async with wired(tmp_path, settings=config, clock=ManualClock(at(1))) as again:
        await again.send(PROMISE)
        await again.send(PROMISE)
        page = await again.views.conversation("c-1")
        assert page is not None
        (promise,) = page.commitments
        assert promise.status == "open" and promise.due_at == T0.replace(hour=17)
        assert [t.kind for t in page.state.timers].count("commitment") == 1
        await again.advance(T0.replace(hour=17, minute=1))
        assert follow_ups(again).count("Reminder") == 1 and follow_ups(again).count("Missed") == 1


async def test_a_case_closed_just_before_a_crash_has_its_timers_and_promises_stopped(db_url: str, tmp_path: Path):
    config = settings(tmp_path, db_url)
    async with wired(tmp_path, settings=config, clock=ManualClock(T0)) as first:
        await first.send(ISSUE, PROMISE)
    await crash_at("event.after_record", tmp_path, CLOSED, settings=config, clock=ManualClock(at(5)))
    async with wired(tmp_path, settings=config, clock=ManualClock(at(5))) as again:
        await again.send(CLOSED)
        page = await again.views.conversation("c-1")
        assert page is not None and page.state.timers == []
        assert [c.status for c in page.commitments] == ["cancelled"]
        await again.advance(at(24 * 60 + 10))
        assert again.published == []  # no "Missed: you promised ..." on a closed case


async def test_the_sweep_says_nothing_on_a_closed_case_whatever_its_timers_say(db_url: str, tmp_path: Path):
    config = settings(tmp_path, db_url)
    async with wired(tmp_path, settings=config, clock=ManualClock(T0)) as vigil:
        await vigil.send(ISSUE, PROMISE, CLOSED)
        # A timer still running on the closed case, and its promise open (armed by an older vigil, say).
        async with vigil.store.engine.begin() as conn:
            await conn.execute(sa.update(COMMITMENT).values(status="open", settled_at=None, settled_by=None))
            due = T0.replace(hour=17)
            commitment_id = "c-1-m2#1"
            await timers.arm(
                conn,
                [
                    Arm(
                        timer_id=f"c-1/commitment/{commitment_id}",
                        conversation_id="c-1",
                        tenant="acme",
                        kind="commitment",
                        started_at=at(1),
                        due_at=due,
                        warn_at=due - timedelta(minutes=15),
                        ref=commitment_id,
                    )
                ],
            )
        await vigil.advance(due + timedelta(minutes=1))
        assert vigil.published == []
        page = await vigil.views.conversation("c-1")
        assert page is not None and [c.status for c in page.commitments] == ["cancelled"]
        assert page.state.timers == []


async def test_a_customer_message_of_59_kb_is_handled_at_once_and_a_timeout_is_never_the_database(
    db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    config = settings(tmp_path, db_url).model_copy(deep=True)
    config.database.timeout_s = 0.5  # a transaction of the store's, or a skill's, that takes longer times out
    huge = "I have been waiting for days and nobody has called me back about the fault, this is terrible. " * 620
    assert 58_000 < len(huge.encode()) < 64 * 1024
    async with wired(tmp_path, settings=config, clock=ManualClock(T0)) as vigil:
        await vigil.send(ISSUE, say(2, "analyst", "Let me look into this for you.", 1))
        with caplog.at_level(logging.WARNING):
            async with asyncio.timeout(10):  # the database never comes into it
                await vigil.send(say(3, "customer", huge, 2))
                await vigil.send(say(4, "customer", "Any update???", 3))  # the long message is read again with it
        assert vigil.sample("vigil_retries_total", dependency="database") == 0
        assert vigil.sample("vigil_skill_failures_total", skill="progress") == 0
        assert "unavailable" not in caplog.text
        (escalation,) = [s for s in vigil.published if s.kind == "escalation"]
        assert "chased" in escalation.text or "sentiment" in escalation.text
