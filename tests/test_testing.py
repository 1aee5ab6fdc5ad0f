"""vigil.testing.wired: the real pipeline on the in-process transport, for tests and for trying a skill."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import UTC, datetime

from vigil.app.settings import Settings
from vigil.core.clock import ManualClock
from vigil.flow.case import CaseState
from vigil.flow.skills import Proposal
from vigil.testing import wired
from vigil.wire.events import Event, Message, parse

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def message(n: int, conversation: str, text: str, **extra: object) -> Message:
    raw = {
        "type": "message",
        "schema_version": 1,
        "message_id": f"{conversation}-{n}",
        "conversation_id": conversation,
        "sent_at": "2026-11-02T09:00:00Z",
        "role": "customer",
        "text": text,
        **extra,
    }
    event = parse(json.dumps(raw).encode(), max_event_bytes=1 << 20, max_text_bytes=1 << 16)
    assert isinstance(event, Message)
    return event


class Echo:
    """Proposes an answer to every customer message, as confident as its text says (``conf=0.9``); notes the
    order it finished them in."""

    name = "echo"
    kind = "answer"

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        if not isinstance(event, Message):
            return ()
        await asyncio.sleep(0.005 if int(event.id.split("-")[-1]) % 2 else 0)  # odd ones would finish later
        self.seen.append(event.id)
        confidence = float(event.text[5:]) if event.text.startswith("conf=") else 0.9
        return (Proposal(kind="answer", text=f"re: {event.text}", confidence=confidence),)


async def test_a_sent_message_is_stored_in_the_directory_and_its_suggestion_published(tmp_path):
    clock = ManualClock(NOW)
    async with wired(tmp_path, skills=[Echo()], clock=clock) as vigil:
        await vigil.send(message(1, "c-1", "How do I set up an eSIM?"))
        (suggestion,) = vigil.published
        assert (suggestion.kind, suggestion.in_reply_to, suggestion.text) == (
            "answer",
            "c-1-1",
            "re: How do I set up an eSIM?",
        )
        assert suggestion.created_at == NOW  # the clock given
        view = await vigil.views.conversation("c-1")
        assert view is not None and [m.text for m in view.messages] == ["How do I set up an eSIM?"]
        assert vigil.sample("vigil_suggestions_published_total", kind="answer") == 1
    assert (tmp_path / "vigil.db").exists()


async def test_a_bad_record_is_dead_lettered_with_its_reason_and_the_rest_goes_on(tmp_path):
    async with wired(tmp_path, skills=[Echo()]) as vigil:
        await vigil.send(b"not json", message(1, "c-1", "hello"))
        ((_, rejection),) = vigil.dead_letters
        assert rejection.reason == "invalid_json"
        assert [s.in_reply_to for s in vigil.published] == ["c-1-1"]
        assert vigil.sample("vigil_events_dead_lettered_total", reason="invalid_json") == 1


async def test_messages_sent_together_are_handled_in_order_within_each_conversation(tmp_path):
    echo = Echo()
    async with wired(tmp_path, skills=[echo]) as vigil:
        await vigil.send(*(message(n, f"c-{n % 3}", f"question {n}") for n in range(12)))
        assert len(vigil.published) == 12
    for conversation in ("c-0", "c-1", "c-2"):
        seen = [i for i in echo.seen if i.startswith(f"{conversation}-")]
        assert seen == sorted(seen, key=lambda i: int(i.split("-")[-1]))


async def test_a_proposal_below_the_floor_is_silenced_and_counted_by_reason(tmp_path):
    settings = Settings(_env_file=None, answers={"enabled": False, "min_confidence": 0.5})  # type: ignore[call-arg, arg-type]
    async with wired(tmp_path, settings=settings, skills=[Echo()]) as vigil:
        await vigil.send(message(1, "c-1", "conf=0.4"), message(2, "c-1", "conf=0.6"))
        assert [s.text for s in vigil.published] == ["re: conf=0.6"]
        assert vigil.sample("vigil_suggestions_suppressed_total", reason="low_confidence") == 1


async def test_only_the_chosen_capabilities_are_set_up(tmp_path):
    async with wired(tmp_path / "all") as everything, wired(tmp_path / "cases", capabilities=["cases"]) as cases_only:
        with everything.feed.watch(tenants=None) as live, cases_only.feed.watch(tenants=None) as not_live:
            await everything.send(message(1, "c-1", "hello"))
            await cases_only.send(message(1, "c-1", "hello"))
            assert [live.queue.get_nowait().kind] == ["message"]  # type: ignore[union-attr]
            assert not_live.queue.empty()  # without the live capability nothing watches the pipeline
        assert await cases_only.views.conversation("c-1") is not None


async def test_advancing_runs_the_capabilities_jobs_due_on_the_way_and_moves_the_clock(tmp_path, embedder):
    start = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
    clock = ManualClock(start)
    settings = Settings(_env_file=None, knowledge={"paths": [], "refresh_interval_s": 60})
    async with wired(tmp_path, settings=settings, clock=clock, embedder=embedder) as vigil:
        assert [job.name for job in vigil.scheduler.jobs] == [
            "knowledge-refresh",
            "miner",
            "progress-timers",
            "procedures",
            "actions-expiry",
            "actions-reconcile",
        ]
        later = datetime(2026, 11, 2, 10, 0, 30, tzinfo=UTC)
        await vigil.advance(later)
        assert clock.now() == later
        # An hour of one-minute windows, coalesced: the refresh only catches up on state, so it ran once.
        assert vigil.sample("vigil_job_runs_total", job="knowledge-refresh", outcome="ran") == 1
        # So does the expiry of actions, every 30 s.
        assert vigil.sample("vigil_job_runs_total", job="actions-expiry", outcome="ran") == 1
        assert vigil.sample("vigil_job_runs_total", job="actions-reconcile", outcome="ran") == 1
