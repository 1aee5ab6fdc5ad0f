"""A case in breach: a target it passed and still owes puts it first in the queue, named, until what the target
measures is met. On the real pipeline (vigil.testing.wired), on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.progress.test_skill import T0, at, change, say, settings
from vigil.cases.views import QueueItem
from vigil.core.clock import ManualClock
from vigil.testing import Wired, wired


@pytest.fixture
async def vigil(tmp_path: Path, db_url: str) -> AsyncIterator[Wired]:
    # First response 10 minutes, next response 20, resolution a day (tests/progress/test_skill.py).
    async with wired(tmp_path, settings=settings(tmp_path, db_url), clock=ManualClock(T0)) as running:
        yield running


async def queue(vigil: Wired) -> list[QueueItem]:
    return await vigil.views.queue(tenants=None, reader=None)


def owed(items: list[QueueItem]) -> dict[str, list[str]]:
    return {i.conversation_id: [b.kind for b in i.breaches] for i in items}


async def test_an_unanswered_customer_past_the_first_response_target_is_in_breach_until_an_analyst_answers(
    vigil: Wired,
):
    await vigil.send(say(1, "customer", "My router keeps dropping the connection", 0, "late"))
    await vigil.send(say(1, "customer", "Where is my parcel?", 12, "fresh"))
    await vigil.advance(at(15))

    (breach,) = (await vigil.views.conversation("late")).breaches  # type: ignore[union-attr]
    assert (breach.kind, breach.due_at) == ("first_response", at(10))
    notice = [s for s in vigil.published if s.kind == "follow_up" and s.conversation_id == "late"][-1]
    assert notice.text == "First response is overdue: it was due by 09:10 UTC on Tue 10 Mar."
    # In breach comes first, though the other customer waits on a clock that falls due sooner than the resolution.
    assert [i.conversation_id for i in await queue(vigil)] == ["late", "fresh"]

    await vigil.send(say(2, "analyst", "Sorry for the wait, let me look at your line.", 16, "late"))
    assert owed(await queue(vigil)) == {"fresh": [], "late": []}
    assert [i.conversation_id for i in await queue(vigil)] == ["fresh", "late"]  # fresh's first response is due


async def test_a_customer_waiting_past_the_reply_target_is_in_breach_until_the_analyst_writes_or_another_team_has_it(
    vigil: Wired,
):
    await vigil.send(say(1, "customer", "Hello, my bill is wrong", 0))
    await vigil.send(say(2, "analyst", "Which month's bill is it?", 1))
    await vigil.send(say(3, "customer", "The March one", 3))
    await vigil.advance(at(24))
    assert owed(await queue(vigil)) == {"c-1": ["next_response"]}
    await vigil.send(change(4, "escalated", 25))
    assert owed(await queue(vigil)) == {"c-1": []}  # another team has it: the reply clock stops


async def test_a_missed_promise_is_a_breach_until_the_analyst_writes_after_its_due_time(vigil: Wired):
    await vigil.send(say(1, "customer", "Is there a fault on my line?", 0))
    await vigil.send(say(2, "analyst", "I'll check with engineering and get back to you within 2 hours.", 1))
    await vigil.advance(at(120))
    assert owed(await queue(vigil)) == {"c-1": []}
    await vigil.advance(at(121))
    (breach,) = (await queue(vigil))[0].breaches
    assert breach.kind == "commitment" and breach.due_at == at(121) and breach.ref == "c-1-m2#1"
    await vigil.send(say(3, "analyst", "Engineering are still on it, I will update you again at 2pm.", 125))
    assert owed(await queue(vigil)) == {"c-1": []}


async def test_the_resolution_target_passed_is_a_breach_until_the_case_is_resolved(vigil: Wired):
    await vigil.send(change(1, "opened", 0))
    await vigil.send(say(2, "customer", "My refund has not arrived", 1))
    await vigil.send(say(3, "analyst", "I have chased the payments team for you.", 2))
    await vigil.advance(at(24 * 60 + 1))
    assert owed(await queue(vigil)) == {"c-1": ["resolution"]}
    await vigil.send(change(4, "status", 24 * 60 + 2, status="resolved"))
    assert (await vigil.views.conversation("c-1")).breaches == []  # type: ignore[union-attr]


async def test_the_queue_puts_the_longest_in_breach_first_then_what_falls_due_then_who_has_waited_longest(
    vigil: Wired,
):
    await vigil.send(say(1, "customer", "First in, waiting longest", 0, "waited"))
    await vigil.send(say(2, "analyst", "Looking now.", 1, "waited"))  # answered: only its resolution clock runs
    await vigil.send(say(1, "customer", "Breached second", 3, "breach-2"))
    await vigil.send(say(1, "customer", "Breached first", 2, "breach-1"))
    await vigil.send(say(1, "customer", "Due soon", 20, "due"))
    await vigil.advance(at(21))
    items = await queue(vigil)
    assert [i.conversation_id for i in items] == ["breach-1", "breach-2", "due", "waited"]
    assert [b.due_at for b in items[0].breaches] == [at(12)] and items[1].breaches[0].due_at == at(13)
    assert items[2].next_due_at == at(30)


async def test_a_breach_found_long_after_it_happened_is_in_the_queue_without_a_notice(vigil: Wired):
    # vigil was down, or the events are old: the sweep finds the target passed 50 minutes ago.
    await vigil.send(say(1, "customer", "My router keeps dropping the connection", 0))
    vigil.clock.advance_to(at(60))  # type: ignore[attr-defined]  # the clock jumps; no sweep ran meanwhile
    sweep = next(job for job in vigil.parts.jobs if job.name == "progress-timers")
    await sweep.run(at(60))
    assert owed(await queue(vigil)) == {"c-1": ["first_response"]}
    assert not [s for s in vigil.published if s.kind == "follow_up" and "overdue" in s.text]
    assert vigil.sample("vigil_sla_breaches_total", clock="first_response", priority="none") == 1
