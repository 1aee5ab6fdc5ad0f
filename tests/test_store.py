"""The case store on SQLite and PostgreSQL: idempotent writes, case state, order, tenants, suggestions."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from vigil.errors import EventConflict, StoreUnavailable
from vigil.events import CaseEvent, Feedback, Message, SourceRef, Suggestion, parse
from vigil.store import CaseStore

LIMITS = {"max_event_bytes": 1 << 20, "max_text_bytes": 1 << 16}


def event(**fields: Any) -> Message | CaseEvent | Feedback:
    return parse(json.dumps({"schema_version": 1, **fields}).encode(), **LIMITS)


def msg(n: int, conversation: str = "c-1", role: str = "customer", **extra: Any) -> Message | CaseEvent | Feedback:
    return event(
        type="message",
        message_id=f"{conversation}-m{n}",
        conversation_id=conversation,
        role=role,
        sent_at=f"2026-11-02T09:{n // 60:02d}:{n % 60:02d}Z",
        text=f"message {n}",
        **extra,
    )


def case(n: int, change: str, conversation: str = "c-1", **extra: Any) -> Message | CaseEvent | Feedback:
    return event(
        type="case",
        event_id=f"{conversation}-e{n}",
        conversation_id=conversation,
        event=change,
        at=f"2026-11-02T10:00:{n:02d}Z",
        **extra,
    )


def suggestion(sid: str, reply_to: str, conversation: str = "c-1") -> Suggestion:
    return Suggestion(
        suggestion_id=sid,
        conversation_id=conversation,
        tenant="default",
        in_reply_to=reply_to,
        created_at=datetime(2026, 11, 2, 9, 0, 1, tzinfo=UTC),
        kind="answer",
        text="Try this",
        confidence=0.7,
        sources=[SourceRef(kind="faq", id="faq-1", title="FAQ", score=0.9)],
        latency_ms=3.5,
    )


async def test_messages_are_stored_once_in_stream_order(store: CaseStore):
    for n in range(5):
        assert (await store.record(msg(n))).new
    for n in range(5):
        assert not (await store.record(msg(n))).new  # a re-delivery changes nothing
    view = await store.conversation("c-1")
    assert view is not None
    assert [m.message_id for m in view.messages] == [f"c-1-m{n}" for n in range(5)]
    assert view.messages[0].sent_at == datetime(2026, 11, 2, 9, 0, 0, tzinfo=UTC)
    assert (await store.count_events())["messages"] == 5


async def test_concurrent_records_share_batches_and_each_gets_its_own_result(store: CaseStore):
    commits: list[object] = []
    sa.event.listen(store.engine.sync_engine, "commit", commits.append)
    events = [msg(n, conversation=f"c-{n % 7}") for n in range(100)]
    results = await asyncio.gather(*(store.record(e) for e in events))
    assert all(r.new for r in results)
    assert len(commits) == 1, "the 100 concurrent records were not committed in one shared transaction"
    again = await asyncio.gather(*(store.record(e) for e in events[:10]))
    assert not any(r.new for r in again)
    assert len(commits) == 2
    assert await store.count_events() == {"conversations": 7, "messages": 100, "case_events": 0}


async def test_a_conversation_tracks_its_case_through_its_life(store: CaseStore):
    await store.record(case(1, "opened", priority="P3"))
    await store.record(case(2, "assigned", assignee="priya.k"))
    state = (await store.record(msg(1))).case
    assert state is not None and (state.status, state.assignee, state.priority, state.message_count) == (
        "open",
        "priya.k",
        "P3",
        1,
    )
    assert (await store.record(case(3, "escalated", priority="P2"))).case.status == "escalated"  # type: ignore[union-attr]
    assert (await store.record(case(4, "status", status="awaiting_engineer"))).case.status == "awaiting_engineer"  # type: ignore[union-attr]
    closed = (await store.record(case(5, "closed", resolution={"resolved_by": "human", "csat": 4}))).case
    assert closed is not None and closed.status == "closed" and closed.closed_at is not None
    reopened = (await store.record(case(6, "reopened"))).case
    assert reopened is not None and reopened.status == "open" and reopened.closed_at is None
    assert not (await store.record(case(5, "closed"))).new  # the old close, re-sent, does not close it again
    view = await store.conversation("c-1")
    assert view is not None and view.status == "open" and view.priority == "P2"


async def test_response_times_are_kept(store: CaseStore):
    await store.record(msg(1, role="bot"))
    await store.record(msg(2, role="customer"))
    await store.record(msg(3, role="analyst"))
    await store.record(msg(4, role="customer"))
    await store.record(msg(5, role="analyst"))
    async with store.engine.connect() as conn:
        row = (
            await conn.execute(
                sa.text(
                    "SELECT first_customer_at, first_response_at, last_customer_at, last_analyst_at, message_count "
                    "FROM conversation WHERE id = 'c-1'"
                )
            )
        ).one()
    first_customer, first_response, last_customer, last_analyst, count = row
    assert str(first_customer).startswith("2026-11-02 09:00:02")
    assert str(first_response).startswith("2026-11-02 09:00:03")
    assert str(last_customer).startswith("2026-11-02 09:00:04")
    assert str(last_analyst).startswith("2026-11-02 09:00:05")
    assert count == 5


async def test_another_tenants_conversation_is_refused_and_nothing_is_written(store: CaseStore):
    await store.record(msg(1, tenant="acme"))
    await store.record(msg(2))  # no tenant: belongs to the conversation's
    with pytest.raises(EventConflict) as caught:
        await store.record(msg(3, tenant="globex"))
    assert caught.value.reason == "tenant_mismatch"
    with pytest.raises(EventConflict):
        await store.record(case(1, "closed", tenant="globex"))
    view = await store.conversation("c-1")
    assert view is not None and view.tenant == "acme" and len(view.messages) == 2 and view.status == "open"


async def test_a_conflict_in_a_batch_does_not_take_the_others_down(store: CaseStore):
    await store.record(msg(0, conversation="owned", tenant="acme"))
    events = [msg(n, conversation=f"c-{n}") for n in range(1, 20)]
    bad = msg(99, conversation="owned", tenant="globex")
    results = await asyncio.gather(*(store.record(e) for e in [*events, bad]), return_exceptions=True)
    assert isinstance(results[-1], EventConflict)
    assert all(not isinstance(r, BaseException) and r.new for r in results[:-1])


async def test_new_conversations_get_the_default_tenant(store: CaseStore):
    await store.record(msg(1, conversation="c-9"))
    view = await store.conversation("c-9")
    assert view is not None and view.tenant == "default"


async def test_feedback_is_stored_once_and_checked_against_the_tenant(store: CaseStore):
    await store.record(msg(1, tenant="acme"))
    fb = {
        "type": "feedback",
        "feedback_id": "f-1",
        "suggestion_id": "s-1",
        "conversation_id": "c-1",
        "verdict": "accepted",
        "at": "2026-11-02T09:05:00Z",
    }
    assert (await store.record(event(**fb))).new
    assert not (await store.record(event(**fb))).new
    with pytest.raises(EventConflict):
        await store.record(event(**{**fb, "feedback_id": "f-2", "tenant": "globex"}))


async def test_unpublished_suggestions_are_found_until_marked(store: CaseStore):
    await store.record(msg(1))
    await store.save_suggestion(suggestion("s-1", "c-1-m1"))
    await store.save_suggestion(suggestion("s-1", "c-1-m1"))  # idempotent
    left = await store.unpublished_replies("c-1-m1")
    assert [s.suggestion_id for s in left] == ["s-1"]
    assert left[0].sources[0].title == "FAQ"
    await store.mark_published(["s-1"])
    assert await store.unpublished_replies("c-1-m1") == []
    view = await store.conversation("c-1")
    assert view is not None and [s.suggestion_id for s in view.suggestions] == ["s-1"]


async def test_the_queue_keeps_those_waiting_longest_whatever_its_limit(store: CaseStore):
    await store.record(msg(1, conversation="waits-longest"))  # 09:00:01, unanswered
    await store.record(msg(5, conversation="waits"))  # 09:00:05, unanswered
    for n, conversation in ((7, "answered-earlier"), (9, "answered-later")):
        await store.record(msg(n, conversation=conversation))
        await store.record(msg(n + 1, conversation=conversation, role="analyst"))

    async def queue(limit: int) -> list[str]:
        return [item.conversation_id for item in await store.queue(tenants=None, reader=None, limit=limit)]

    assert await queue(10) == ["waits-longest", "waits", "answered-later", "answered-earlier"]
    assert await queue(1) == ["waits-longest"]  # the least recently updated, and the first to keep


async def test_the_queue_shows_each_reader_what_was_suggested_since_they_last_read(store: CaseStore):
    await store.record(msg(1))
    await store.record(msg(1, conversation="c-2", tenant="acme"))
    later = suggestion("s-2", "c-1-m1").model_copy(update={"created_at": datetime(2026, 11, 2, 9, 5, tzinfo=UTC)})
    for made in (suggestion("s-1", "c-1-m1"), later, suggestion("s-3", "c-1-m1")):
        await store.save_suggestion(made)
    await store.mark_published(["s-1", "s-2"])  # s-3 is not out yet

    async def unread(reader: str | None) -> dict[str, list[str]]:
        return {
            item.conversation_id: item.unread_suggestions for item in await store.queue(tenants=None, reader=reader)
        }

    assert await unread("ana") == {"c-1": ["s-1", "s-2"], "c-2": []}
    assert await store.mark_read("ana", "c-1", datetime(2026, 11, 2, 9, 2, tzinfo=UTC), tenants=None)
    assert (await unread("ana"))["c-1"] == ["s-2"]
    assert (await unread("bo"))["c-1"] == ["s-1", "s-2"]
    # A mark never moves back; another tenant's or an unknown conversation is not marked.
    assert await store.mark_read("ana", "c-1", datetime(2026, 11, 2, 9, 1, tzinfo=UTC), tenants=None)
    assert not await store.mark_read("ana", "c-1", datetime(2026, 11, 2, 9, 9, tzinfo=UTC), tenants=["acme"])
    assert not await store.mark_read("ana", "nope", datetime(2026, 11, 2, 9, 9, tzinfo=UTC), tenants=None)
    assert (await unread("ana"))["c-1"] == ["s-2"]
    # A verdict, by anyone, settles a suggestion for everyone.
    verdict = {"type": "feedback", "feedback_id": "f-1", "suggestion_id": "s-2", "conversation_id": "c-1"}
    await store.record(event(**verdict, verdict="dismissed", at="2026-11-02T09:06:00Z"))
    assert (await unread("bo"))["c-1"] == ["s-1"]
    assert (await unread(None))["c-1"] == ["s-1"]
    assert (await unread("ana"))["c-1"] == []


async def test_unknown_conversation_is_none(store: CaseStore):
    assert await store.conversation("nope") is None


async def test_migrations_are_idempotent(store: CaseStore):
    await store.migrate()
    await store.record(msg(1))
    await store.migrate()
    assert (await store.count_events())["messages"] == 1


async def test_an_unreachable_database_is_reported_as_unavailable(tmp_path):
    from tests.conftest import make_settings
    from vigil.clock import SystemClock

    settings = make_settings(tmp_path=tmp_path, db_url="postgresql+asyncpg://postgres@127.0.0.1:1/none")
    dead = CaseStore.from_settings(settings, clock=SystemClock())
    try:
        with pytest.raises(StoreUnavailable):
            await dead.ping()
        with pytest.raises(StoreUnavailable):
            await dead.record(msg(1))
        with pytest.raises(StoreUnavailable):
            await dead.migrate()
    finally:
        await dead.close()
