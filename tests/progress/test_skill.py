"""Progress through a case's life, on the real pipeline (vigil.testing.wired) and a simulated clock: SLA timers
warned of and breached, commitments reminded, kept, missed and cancelled, escalation, handover, restarts, replicas."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_settings
from vigil.app.settings import Settings
from vigil.cases.views import ConversationView
from vigil.core.clock import ManualClock
from vigil.testing import Wired, wired
from vigil.wire.events import Event, parse

T0 = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)  # a Tuesday
LIMITS = {"max_event_bytes": 1 << 20, "max_text_bytes": 1 << 16}


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def say(n: int, role: str, text: str, minutes: float, conversation: str = "c-1", **extra: Any) -> Event:
    raw = {
        "type": "message",
        "schema_version": 1,
        "message_id": f"{conversation}-m{n}",
        "conversation_id": conversation,
        "tenant": "acme",
        "sent_at": at(minutes).isoformat(),
        "role": role,
        "text": text,
        **extra,
    }
    return parse(json.dumps(raw).encode(), **LIMITS)


def change(n: int, what: str, minutes: float, conversation: str = "c-1", **extra: Any) -> Event:
    raw = {
        "type": "case",
        "schema_version": 1,
        "event_id": f"{conversation}-e{n}",
        "conversation_id": conversation,
        "tenant": "acme",
        "at": at(minutes).isoformat(),
        "event": what,
        **extra,
    }
    return parse(json.dumps(raw).encode(), **LIMITS)


def settings(tmp_path: Path, db_url: str | None = None, **progress: Any) -> Settings:
    sla = {"*": {"*": {"first_response_s": 600, "next_response_s": 1200, "resolution_s": 86400}}}
    return make_settings(
        tmp_path=tmp_path,
        db_url=db_url,
        answers={"enabled": False},
        miner={"enabled": False},
        progress={"sla": sla, "warn_before_s": 120, "remind_before_s": 900, **progress},
    )


@pytest.fixture
async def vigil(tmp_path: Path) -> AsyncIterator[Wired]:
    async with wired(tmp_path, settings=settings(tmp_path), clock=ManualClock(T0)) as running:
        yield running


async def view(vigil: Wired, conversation: str = "c-1") -> ConversationView:
    got = await vigil.views.conversation(conversation)
    assert got is not None
    return got


def kinds(vigil: Wired) -> list[str]:
    return [s.kind for s in vigil.published]


async def test_the_first_response_clock_runs_from_the_customers_first_message_and_warns_before_it_falls_due(
    vigil: Wired,
):
    await vigil.send(say(1, "customer", "My router keeps dropping the connection", 0))
    state = (await view(vigil)).state
    assert state.status == "new" and state.since == at(0)
    clocks = {t.kind: t for t in state.timers}
    assert clocks["first_response"].due_at == at(10) and clocks["first_response"].warn_at == at(8)
    assert clocks["resolution"].due_at == at(24 * 60)

    await vigil.advance(at(7.9))
    assert vigil.published == []
    await vigil.advance(at(8))
    (warning,) = vigil.published
    assert warning.kind == "follow_up" and "First response is due by 09:10" in warning.text
    assert warning.created_at == at(8)  # at its own moment of simulated time
    await vigil.advance(at(10))
    assert vigil.sample("vigil_sla_breaches_total", clock="first_response", priority="none") == 1
    assert "first_response" not in {t.kind for t in (await view(vigil)).state.timers}


async def test_an_answer_in_time_stops_the_clock_and_nothing_is_breached(vigil: Wired):
    await vigil.send(say(1, "customer", "Hello, my bill is wrong", 0))
    await vigil.advance(at(5))
    await vigil.send(say(2, "analyst", "Hi, let me take a look at your bill.", 5))
    state = (await view(vigil)).state
    assert state.status == "waiting_on_customer"
    assert [t.kind for t in state.timers] == ["resolution"]
    await vigil.advance(at(60))
    assert vigil.published == []
    assert vigil.sample("vigil_sla_breaches_total", clock="first_response", priority="none") == 0


async def test_each_wait_for_the_analyst_has_its_own_next_response_clock(vigil: Wired):
    await vigil.send(say(1, "customer", "Hello, my bill is wrong", 0))
    await vigil.send(say(2, "analyst", "Which month's bill is it?", 1))
    await vigil.send(say(3, "customer", "The March one", 3))
    (clock,) = [t for t in (await view(vigil)).state.timers if t.kind == "next_response"]
    assert clock.due_at == at(23)
    await vigil.send(say(4, "analyst", "I can see the extra charge on it.", 6))
    await vigil.send(say(5, "customer", "So can you remove it?", 8))
    (clock,) = [t for t in (await view(vigil)).state.timers if t.kind == "next_response"]
    assert clock.due_at == at(28)


async def test_escalation_stops_the_response_clocks_and_gives_a_handover_brief(vigil: Wired):
    await vigil.send(change(1, "opened", 0, assignee="sam", priority="high"))
    await vigil.send(say(2, "customer", "I was charged twice for my December bill and I am annoyed.", 1))
    await vigil.send(
        say(3, "analyst", "I can see the double charge. I'll email you the refund confirmation by 5pm today.", 2)
    )
    await vigil.send(change(4, "escalated", 3))
    state = (await view(vigil)).state
    assert state.status == "waiting_on_internal"
    assert {t.kind for t in state.timers} == {"resolution", "commitment"}
    (brief,) = [s for s in vigil.published if s.kind == "handover"]
    assert "Problem: I was charged twice for my December bill" in brief.text
    assert "Tried: I can see the double charge." in brief.text
    assert "Open promises: email you the refund confirmation" in brief.text and "17:00" in brief.text


async def test_reassignment_gives_a_brief_but_the_first_assignment_does_not(vigil: Wired):
    await vigil.send(say(1, "customer", "My parcel never came", 0))
    await vigil.send(change(2, "assigned", 1, assignee="sam"))
    assert "handover" not in kinds(vigil)
    await vigil.send(change(3, "assigned", 2, assignee="sam"))
    assert "handover" not in kinds(vigil)
    await vigil.send(change(4, "assigned", 3, assignee="ria"))
    (brief,) = [s for s in vigil.published if s.kind == "handover"]
    assert brief.why == "the case was reassigned to ria"


async def test_a_promise_is_recorded_reminded_before_it_falls_due_and_missed_when_it_passes(vigil: Wired):
    await vigil.send(say(1, "customer", "Is there a fault on my line?", 0))
    await vigil.send(say(2, "analyst", "I'll check with engineering and get back to you within 2 hours.", 1))
    (promise,) = (await view(vigil)).commitments
    assert promise.status == "open" and promise.due_at == at(121) and promise.message_id == "c-1-m2"
    assert "check with engineering" in promise.what

    await vigil.advance(at(105.9))
    assert "follow_up" not in kinds(vigil)
    await vigil.advance(at(106))
    (reminder,) = [s for s in vigil.published if s.kind == "follow_up"]
    assert reminder.text.startswith('Reminder: due by 11:01 UTC on Tue 10 Mar, you promised: "check with engineering')
    assert reminder.created_at == at(106)
    await vigil.advance(at(121))
    missed = [s for s in vigil.published if s.kind == "follow_up"][-1]
    assert missed.text.startswith("Missed:")
    (promise,) = (await view(vigil)).commitments
    assert promise.status == "missed" and promise.settled_at == at(121)
    assert vigil.sample("vigil_commitments_settled_total", status="missed") == 1


async def test_an_open_promise_keeps_the_case_on_the_analyst_until_it_is_kept(vigil: Wired):
    await vigil.send(say(1, "customer", "Is there a fault on my line?", 0))
    await vigil.send(say(2, "analyst", "I'll check with engineering and get back to you within 2 hours.", 1))
    state = (await view(vigil)).state
    assert (state.status, state.since) == ("waiting_on_analyst", at(1))  # the analyst owes the next move
    await vigil.send(say(3, "customer", "Thanks, I'll wait", 2))
    await vigil.send(say(4, "analyst", "Do you have any other devices on the line?", 3))  # not the promised update
    assert (await view(vigil)).state.status == "waiting_on_analyst"
    await vigil.advance(at(121))  # missed: still the analyst's move
    assert (await view(vigil)).state.status == "waiting_on_analyst"
    await vigil.send(say(5, "analyst", "I've heard back from engineering: the fault at the exchange is fixed.", 125))
    assert (await view(vigil)).state.status == "waiting_on_customer"


async def test_a_kept_promise_hands_the_case_back_to_the_customer(vigil: Wired):
    await vigil.send(say(1, "customer", "Is there a fault on my line?", 0))
    await vigil.send(say(2, "analyst", "I'll check with engineering and get back to you within 2 hours.", 1))
    await vigil.send(say(3, "analyst", "I've heard back from engineering: the fault at the exchange is fixed.", 40))
    assert (await view(vigil)).state.status == "waiting_on_customer"
    await vigil.send(say(4, "analyst", "I'll call you back if it drops again.", 41))  # no due time: no owed move
    assert (await view(vigil)).state.status == "waiting_on_customer"


async def test_a_promise_followed_up_on_is_kept_and_never_reminded(vigil: Wired):
    await vigil.send(say(1, "customer", "Is there a fault on my line?", 0))
    await vigil.send(say(2, "analyst", "I'll check with engineering and get back to you within 2 hours.", 1))
    await vigil.send(say(3, "analyst", "I've heard back from engineering: the fault at the exchange is fixed.", 40))
    (promise,) = (await view(vigil)).commitments
    assert promise.status == "kept" and promise.settled_at == at(40)
    assert "commitment" not in {t.kind for t in (await view(vigil)).state.timers}
    await vigil.advance(at(200))
    assert "follow_up" not in kinds(vigil)


async def test_what_is_not_a_promise_is_not_recorded(vigil: Wired):
    await vigil.send(say(1, "customer", "I'll send you the photos tomorrow", 0))
    await vigil.send(say(2, "analyst", "I sent the label to you yesterday.", 1))
    await vigil.send(say(3, "analyst", "Shall I call you tomorrow morning?", 2))
    assert (await view(vigil)).commitments == []


async def test_closing_the_case_cancels_its_open_promises_and_stops_every_clock(vigil: Wired):
    await vigil.send(say(1, "customer", "Is there a fault on my line?", 0))
    await vigil.send(say(2, "analyst", "I'll call you back within the hour.", 1))
    await vigil.send(change(3, "closed", 5, resolution={"resolved_by": "human"}))
    got = await view(vigil)
    assert got.state.status == "closed" and got.state.timers == []
    assert [c.status for c in got.commitments] == ["cancelled"]
    await vigil.advance(at(120))
    assert vigil.published == []


async def test_a_reopened_case_runs_on_its_resolution_clock_again(vigil: Wired):
    await vigil.send(say(1, "customer", "Is there a fault on my line?", 0))
    await vigil.send(change(2, "status", 5, status="solved"))
    assert (await view(vigil)).state.timers == []
    await vigil.send(change(3, "reopened", 30))
    state = (await view(vigil)).state
    assert state.status == "waiting_on_analyst"
    assert [t.due_at for t in state.timers if t.kind == "resolution"] == [at(24 * 60)]


async def test_a_customer_who_keeps_chasing_gets_an_escalation_suggested_once(vigil: Wired):
    await vigil.send(say(1, "customer", "My refund has not arrived", 0))
    await vigil.send(say(2, "analyst", "Let me look into it.", 1))
    await vigil.send(say(3, "customer", "any update?", 30))
    assert "escalation" not in kinds(vigil)
    await vigil.send(say(4, "customer", "Hello?? still waiting", 45))
    (escalation,) = [s for s in vigil.published if s.kind == "escalation"]
    assert "chased 2 times" in escalation.text
    await vigil.send(say(5, "customer", "any news??", 50))
    assert kinds(vigil).count("escalation") == 1
    assert (await view(vigil)).progress is not None


async def test_a_warning_that_comes_after_its_due_time_is_not_given(vigil: Wired):
    await vigil.send(say(1, "customer", "Is there a fault on my line?", 0))
    await vigil.send(say(2, "analyst", "I'll get back to you within 2 hours.", 1))
    # vigil was down from here until after the promise fell due (its sweep did not run): no reminder, the missed
    # notice only, once it is back.
    clock = vigil.clock
    assert isinstance(clock, ManualClock)
    clock.advance_to(at(130))
    await vigil.advance(at(131))
    texts = [s.text.split(":")[0] for s in vigil.published]
    assert texts.count("Reminder") == 0 and texts.count("Missed") == 1


async def test_timers_pending_at_a_restart_fire_after_it(tmp_path: Path):
    config = settings(tmp_path)
    async with wired(tmp_path, settings=config, clock=ManualClock(T0)) as first:
        await first.send(say(1, "customer", "Is there a fault on my line?", 0))
        await first.send(say(2, "analyst", "I'll get back to you within 2 hours.", 1))
    async with wired(tmp_path, settings=config, clock=ManualClock(at(60))) as second:
        await second.advance(at(121))
        texts = [s.text for s in second.published]
        assert any(t.startswith("Reminder:") for t in texts) and any(t.startswith("Missed:") for t in texts)
        assert second.sample("vigil_sla_breaches_total", clock="first_response", priority="none") == 0


async def test_two_replicas_sharing_a_database_fire_each_timer_once(db_url: str, tmp_path: Path):
    config = settings(tmp_path, db_url)
    clock = ManualClock(T0)
    async with (
        wired(tmp_path / "a", settings=config, clock=clock) as a,
        wired(tmp_path / "b", settings=config, clock=clock) as b,
    ):
        for n in range(20):
            conversation = f"c-{n}"
            await a.send(say(1, "customer", "Is there a fault on my line?", 0, conversation))
            await a.send(say(2, "analyst", "I'll get back to you within 2 hours.", 1, conversation))
        # Both sweep at once, as two replicas' schedulers would: at the reminders' moment, then at the due time.
        reminders_a = a.parts.jobs[[j.name for j in a.parts.jobs].index("progress-timers")]
        reminders_b = b.parts.jobs[[j.name for j in b.parts.jobs].index("progress-timers")]
        for moment in (at(107), at(122)):
            clock.advance_to(moment)
            await asyncio.gather(reminders_a.run(moment), reminders_b.run(moment), reminders_a.run(moment))
        said = [s.suggestion_id for s in [*a.published, *b.published] if s.kind == "follow_up"]
        assert len(said) == len(set(said)) == 40  # per conversation, the reminder and the missed notice, once each
        per: dict[str, list[str]] = {}
        for s in [*a.published, *b.published]:
            per.setdefault(s.conversation_id, []).append(s.text.split(":")[0])
        assert all(sorted(v) == ["Missed", "Reminder"] for v in per.values()), per
