"""The pipeline shows every event to the skills until they have finished with it: a crash between an event's commit
and the skills' end, and a redelivery, shows it to them again; once they have finished, a redelivery is a plain
duplicate. On the real pipeline (vigil.testing.wired), SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.conftest import make_settings
from tests.failpoints import crash_at
from vigil.app.settings import Settings
from vigil.core.clock import ManualClock
from vigil.flow.case import CaseState
from vigil.flow.skills import Proposal
from vigil.testing import wired
from vigil.wire.events import Event, parse

T0 = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
LIMITS = {"max_event_bytes": 1 << 20, "max_text_bytes": 1 << 16}


def event(raw: dict[str, Any]) -> Event:
    return parse(
        json.dumps({"schema_version": 1, "conversation_id": "c-1", "tenant": "acme", **raw}).encode(), **LIMITS
    )


QUESTION = event(
    {"type": "message", "message_id": "m-1", "sent_at": T0.isoformat(), "role": "customer", "text": "Refund please."}
)
APPROVAL = event(
    {
        "type": "feedback",
        "feedback_id": "f-1",
        "suggestion_id": "s-unknown",
        "verdict": "approved",
        "by": "lead-1",
        "at": (T0 + timedelta(minutes=1)).isoformat(),
    }
)


class Seen:
    """A skill that notes every event it is shown, and says one thing about each message."""

    kind = "note"

    def __init__(self, name: str = "seen") -> None:
        self.name = name
        self.events: list[str] = []

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        self.events.append(event.id)
        if event.type != "message":
            return []
        return [Proposal(kind="note", text=f"about {event.id}", confidence=1.0)]


def settings(tmp_path: Path, db_url: str) -> Settings:
    return make_settings(
        tmp_path=tmp_path,
        db_url=db_url,
        answers={"enabled": False},
        miner={"enabled": False},
        graceful_timeout_s=0.2,
    )


async def test_a_feedback_stored_just_before_a_crash_is_shown_to_the_skills_when_it_is_redelivered(
    db_url: str, tmp_path: Path
):
    config = settings(tmp_path, db_url)
    async with wired(tmp_path, settings=config, clock=ManualClock(T0)) as first:
        await first.send(QUESTION)
    await crash_at("event.after_record", tmp_path, APPROVAL, settings=config, clock=ManualClock(T0))
    seen = Seen()
    async with wired(tmp_path, settings=config, clock=ManualClock(T0), skills=[seen]) as again:
        await again.send(APPROVAL)
        assert seen.events == ["f-1"]  # the approval is acted on, though it was stored before the crash
        await again.send(APPROVAL)
        assert seen.events == ["f-1"]  # finished with: a plain duplicate now
        assert again.sample("vigil_events_duplicate_total", type="feedback") == 2


async def test_a_skill_that_had_not_finished_speaks_after_the_redelivery_and_what_it_says_is_published_once(
    db_url: str, tmp_path: Path
):
    config = settings(tmp_path, db_url)
    await crash_at("skill.after:seen", tmp_path, QUESTION, settings=config, clock=ManualClock(T0), skills=[Seen()])
    seen = Seen()
    async with wired(tmp_path, settings=config, clock=ManualClock(T0), skills=[seen]) as again:
        await again.send(QUESTION)
        await again.send(QUESTION)
        assert seen.events == ["m-1"]
        assert [s.text for s in again.published] == ["about m-1"]
        page = await again.views.conversation("c-1")
        assert page is not None and [s.text for s in page.suggestions] == ["about m-1"]


async def test_every_skill_speaks_once_after_a_crash_in_between_and_a_later_redelivery_publishes_nothing(
    db_url: str, tmp_path: Path
):
    config = settings(tmp_path, db_url)
    talker, late = Seen("talker"), Seen("late")
    await crash_at(
        "skill.after:late", tmp_path, QUESTION, settings=config, clock=ManualClock(T0), skills=[talker, late]
    )
    # The crash came between the two skills, before anything was stored or published: both speak after the
    # redelivery, once each.
    async with wired(tmp_path, settings=config, clock=ManualClock(T0), skills=[Seen("talker"), Seen("late")]) as again:
        await again.send(QUESTION)
        assert sorted(s.text for s in again.published) == ["about m-1", "about m-1"]
        ids = {s.suggestion_id for s in again.published}
        assert len(ids) == 2
    async with wired(tmp_path, settings=config, clock=ManualClock(T0), skills=[Seen("talker"), Seen("late")]) as third:
        await third.send(QUESTION)
        assert third.published == []


class SaysAgain(Seen):
    """A skill that names what it says (as an action's card is named by its action): the same key on every message,
    in words that change."""

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        self.events.append(event.id)
        return [Proposal(kind="note", text=f"said on {event.id}", confidence=1.0, key="the-one")]


async def test_a_suggestion_id_said_again_in_other_words_goes_out_once_with_what_was_said_first(
    db_url: str, tmp_path: Path
):
    config = settings(tmp_path, db_url)
    second = event(
        {"type": "message", "message_id": "m-2", "sent_at": T0.isoformat(), "role": "customer", "text": "Hello?"}
    )
    async with wired(tmp_path, settings=config, clock=ManualClock(T0), skills=[SaysAgain()]) as running:
        await running.send(QUESTION, second)
        assert [s.text for s in running.published] == ["said on m-1"]


async def test_a_job_that_announces_again_in_other_words_publishes_what_was_stored_and_not_yet_out(
    db_url: str, tmp_path: Path
):
    config = settings(tmp_path, db_url)
    async with wired(tmp_path, settings=config, clock=ManualClock(T0)) as running:
        pipeline = running.parts.pipeline()
        first = Proposal(kind="note", text="due in 10 minutes", confidence=1.0)
        said = await pipeline.announce(first, conversation_id="c-1", tenant="acme", key="timer-1")
        again = Proposal(kind="note", text="due in 9 minutes", confidence=1.0)
        await pipeline.announce(again, conversation_id="c-1", tenant="acme", key="timer-1")
        assert said is not None and [s.suggestion_id for s in running.published] == [said.suggestion_id]
        assert [s.text for s in running.published] == ["due in 10 minutes"]
        # Stored and never published (a crash between): the stored words go out, not the new ones.
        await running.store.save_suggestion(
            said.model_copy(update={"suggestion_id": "s-stored", "text": "stored first", "in_reply_to": None})
        )
        stored = await running.store.save_suggestion(said.model_copy(update={"suggestion_id": "s-stored"}))
        assert stored is not None and stored.text == "stored first"
