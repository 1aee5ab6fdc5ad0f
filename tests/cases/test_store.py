"""The case store on SQLite and PostgreSQL: idempotent writes, case state, order, tenants, suggestions."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from tests.conftest import PG_ADMIN, case_store, make_settings, migrated_store, views_of
from vigil.cases.store import CaseStore
from vigil.cases.views import CaseViews
from vigil.core.errors import EventConflict, StoreError, StoreUnavailable
from vigil.wire.events import Action, Event, SourceRef, Suggestion, parse

LIMITS = {"max_event_bytes": 1 << 20, "max_text_bytes": 1 << 16}
EPOCH = "2026-11-02T09:00:00Z"


def event(**fields: Any) -> Event:
    return parse(json.dumps({"schema_version": 1, **fields}).encode(), **LIMITS)


def msg(n: int, conversation: str = "c-1", role: str = "customer", **extra: Any) -> Event:
    return event(
        type="message",
        message_id=f"{conversation}-m{n}",
        conversation_id=conversation,
        role=role,
        sent_at=f"2026-11-02T09:{n // 60:02d}:{n % 60:02d}Z",
        **{"text": f"message {n}", **extra},
    )


def case(n: int, change: str, conversation: str = "c-1", **extra: Any) -> Event:
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


async def test_messages_are_stored_once_in_stream_order(store: CaseStore, views: CaseViews):
    for n in range(5):
        assert (await store.record(msg(n))).new
    for n in range(5):
        assert not (await store.record(msg(n))).new  # a re-delivery changes nothing
    view = await views.conversation("c-1")
    assert view is not None
    assert [m.message_id for m in view.messages] == [f"c-1-m{n}" for n in range(4, -1, -1)]  # newest first
    assert view.messages[-1].sent_at == datetime(2026, 11, 2, 9, 0, 0, tzinfo=UTC)
    assert (await views.count_events())["messages"] == 5


async def test_concurrent_records_share_batches_and_each_gets_its_own_result(store: CaseStore, views: CaseViews):
    commits: list[object] = []
    sa.event.listen(store.engine.sync_engine, "commit", commits.append)
    events = [msg(n, conversation=f"c-{n % 7}") for n in range(100)]
    results = await asyncio.gather(*(store.record(e) for e in events))
    assert all(r.new for r in results)
    assert len(commits) == 1, "the 100 concurrent records were not committed in one shared transaction"
    again = await asyncio.gather(*(store.record(e) for e in events[:10]))
    assert not any(r.new for r in again)
    assert len(commits) == 2
    assert await views.count_events() == {"conversations": 7, "messages": 100, "case_events": 0}


async def test_a_conversation_tracks_its_case_through_its_life(store: CaseStore, views: CaseViews):
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
    view = await views.conversation("c-1")
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


async def test_another_tenants_conversation_is_refused_and_nothing_is_written(store: CaseStore, views: CaseViews):
    await store.record(msg(1, tenant="acme"))
    await store.record(msg(2))  # no tenant: belongs to the conversation's
    with pytest.raises(EventConflict) as caught:
        await store.record(msg(3, tenant="globex"))
    assert caught.value.reason == "tenant_mismatch"
    with pytest.raises(EventConflict):
        await store.record(case(1, "closed", tenant="globex"))
    view = await views.conversation("c-1")
    assert view is not None and view.tenant == "acme" and len(view.messages) == 2 and view.status == "open"


async def test_a_conflict_in_a_batch_does_not_take_the_others_down(store: CaseStore):
    await store.record(msg(0, conversation="owned", tenant="acme"))
    events = [msg(n, conversation=f"c-{n}") for n in range(1, 20)]
    bad = msg(99, conversation="owned", tenant="globex")
    results = await asyncio.gather(*(store.record(e) for e in [*events, bad]), return_exceptions=True)
    assert isinstance(results[-1], EventConflict)
    assert all(not isinstance(r, BaseException) and r.new for r in results[:-1])


async def test_new_conversations_get_the_default_tenant(store: CaseStore, views: CaseViews):
    await store.record(msg(1, conversation="c-9"))
    view = await views.conversation("c-9")
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


async def test_unpublished_suggestions_are_found_until_marked(store: CaseStore, views: CaseViews):
    await store.record(msg(1))
    await store.save_suggestion(suggestion("s-1", "c-1-m1"))
    await store.save_suggestion(suggestion("s-1", "c-1-m1"))  # idempotent
    left = await store.unpublished_replies("c-1", "c-1-m1")
    assert [s.suggestion_id for s in left] == ["s-1"]
    assert left[0].sources[0].title == "FAQ"
    await store.mark_published(["s-1"])
    assert await store.unpublished_replies("c-1", "c-1-m1") == []
    view = await views.conversation("c-1")
    assert view is not None and [s.suggestion_id for s in view.suggestions] == ["s-1"]


async def test_migrations_are_idempotent(store: CaseStore, views: CaseViews):
    await store.migrate()
    await store.record(msg(1))
    await store.migrate()
    assert (await views.count_events())["messages"] == 1


async def test_an_unreachable_database_is_reported_as_unavailable(tmp_path):
    settings = make_settings(tmp_path=tmp_path, db_url="postgresql+asyncpg://postgres@127.0.0.1:1/none")
    dead = case_store(settings)
    try:
        with pytest.raises(StoreUnavailable):
            await dead.ping()
        with pytest.raises(StoreUnavailable):
            await dead.record(msg(1))
        with pytest.raises(StoreUnavailable):
            await dead.migrate()
    finally:
        await dead.close()


# --- Idempotency is per conversation: ids of two conversations (of one tenant or two) never collide ---


async def test_two_tenants_and_two_conversations_may_reuse_an_id(store: CaseStore, views: CaseViews):
    def same_ids(conversation: str, tenant: str) -> list[Event]:
        at = {"conversation_id": conversation, "tenant": tenant}
        return [
            event(type="message", message_id="m-1", role="customer", sent_at="2026-11-02T09:00:00Z", text="hi", **at),
            event(type="case", event_id="e-1", event="escalated", at="2026-11-02T09:00:01Z", **at),
            event(type="feedback", feedback_id="f-1", suggestion_id="s-?", verdict="accepted", at=EPOCH, **at),
        ]

    owners = {"acme-1": "acme", "globex-1": "globex", "acme-2": "acme"}
    for conversation, tenant in owners.items():
        results = [await store.record(e) for e in same_ids(conversation, tenant)]
        assert [r.new for r in results] == [True, True, True], conversation
    for conversation, tenant in owners.items():
        view = await views.conversation(conversation)
        assert view is not None, f"{conversation} was never created"
        assert (view.tenant, view.status, [m.message_id for m in view.messages]) == (tenant, "escalated", ["m-1"])
    async with store.engine.connect() as conn:  # a page shows verdicts on its own suggestions only: read the table
        verdicts = (await conn.execute(sa.text("SELECT conversation_id, feedback_id FROM feedback"))).all()
    assert sorted(tuple(row) for row in verdicts) == sorted((c, "f-1") for c in owners)
    assert await views.count_events() == {"conversations": 3, "messages": 3, "case_events": 3}
    again = [await store.record(e) for c, t in owners.items() for e in same_ids(c, t)]
    assert not any(r.new for r in again)  # still idempotent within each conversation
    assert await views.count_events() == {"conversations": 3, "messages": 3, "case_events": 3}


async def test_ids_reused_across_conversations_in_one_batch_are_each_new(store: CaseStore, views: CaseViews):
    same = [
        event(type="message", message_id="m-1", conversation_id=f"c-{n}", role="customer", sent_at=EPOCH, text="hi")
        for n in range(20)
    ]
    await store.record(same[0])
    results = await asyncio.gather(*(store.record(e) for e in same))
    assert [r.new for r in results] == [False] + [True] * 19
    assert await views.count_events() == {"conversations": 20, "messages": 20, "case_events": 0}


# --- Feedback judges only a suggestion of its own conversation ---


async def test_a_stored_action_comes_back_as_the_action_it_was(store: CaseStore):
    await store.record(msg(1))
    action = Action(name="refund_order", arguments={"order": "A-1"})
    await store.save_suggestion(suggestion("s-1", "c-1-m1").model_copy(update={"kind": "action", "action": action}))
    (left,) = await store.unpublished_replies("c-1", "c-1-m1")
    assert left.action == action and isinstance(left.sources[0], SourceRef)


async def test_feedback_on_another_conversations_suggestion_is_refused(store: CaseStore, views: CaseViews):
    await store.record(msg(1, conversation="c-1", tenant="acme"))
    await store.record(msg(1, conversation="c-2", tenant="acme"))
    await store.record(msg(1, conversation="g-1", tenant="globex"))
    await store.save_suggestion(
        suggestion("s-acme", "c-1-m1", conversation="c-1").model_copy(update={"tenant": "acme"})
    )
    verdict = {"type": "feedback", "suggestion_id": "s-acme", "verdict": "accepted", "at": EPOCH}

    with pytest.raises(EventConflict) as other_tenant:
        await store.record(event(**verdict, feedback_id="f-1", conversation_id="g-1", tenant="globex"))
    assert other_tenant.value.reason == "tenant_mismatch"
    with pytest.raises(EventConflict) as other_conversation:
        await store.record(event(**verdict, feedback_id="f-2", conversation_id="c-2"))
    assert other_conversation.value.reason == "address_mismatch"
    with pytest.raises(EventConflict) as untenanted:
        await store.record(event(**verdict, feedback_id="f-3", conversation_id="g-1"))
    assert untenanted.value.reason == "address_mismatch"
    for conversation in ("c-2", "g-1"):
        view = await views.conversation(conversation)
        assert view is not None and view.feedback == [], "a refused verdict was stored"

    own = await store.record(event(**verdict, feedback_id="f-4", conversation_id="c-1", tenant="acme"))
    assert own.new and own.suggestion_kind == "answer"


async def test_feedback_cannot_wait_in_a_conversation_not_yet_opened_for_a_suggestion_to_come(
    store: CaseStore, views: CaseViews
):
    # Suggestion ids are predictable: globex names acme's next conversation and the suggestion vigil will make there.
    ahead = {"type": "feedback", "suggestion_id": "s-future", "verdict": "dismissed", "at": EPOCH}
    with pytest.raises(EventConflict) as early:
        await store.record(event(**ahead, feedback_id="f-early", conversation_id="c-9", tenant="globex"))
    assert early.value.reason == "unknown_conversation"
    await store.record(msg(1, conversation="c-9", tenant="acme"))
    await store.save_suggestion(
        suggestion("s-future", "c-9-m1", conversation="c-9").model_copy(update={"tenant": "acme"})
    )
    view = await views.conversation("c-9")
    assert view is not None and view.tenant == "acme" and view.feedback == []


# --- PostgreSQL errors by SQLSTATE: what passes is retried, what is a refusal is not ---

# A trigger on the write path that raises whatever SQLSTATE the test puts in ``fault``, quoting the message's text
# in the error, as PostgreSQL's own data errors quote the values they refuse.
FAULT = (
    "CREATE TABLE fault (code text NOT NULL)",
    """CREATE FUNCTION raise_fault() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE wanted text;
    BEGIN
      SELECT code INTO wanted FROM fault LIMIT 1;
      IF wanted IS NOT NULL THEN
        RAISE EXCEPTION 'injected % on %', wanted, NEW.text USING ERRCODE = wanted;
      END IF;
      RETURN NEW;
    END $$""",
    "CREATE TRIGGER fault BEFORE INSERT ON message FOR EACH ROW EXECUTE FUNCTION raise_fault()",
)


def psycopg_url(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


async def with_fault(store: CaseStore) -> None:
    """Install the ``fault`` trigger on the store's migrated database."""
    async with store.engine.begin() as conn:
        for statement in FAULT:
            await conn.exec_driver_sql(statement)


async def set_fault(store: CaseStore, code: str | None) -> None:
    async with store.engine.begin() as conn:
        await conn.exec_driver_sql("DELETE FROM fault")
        if code is not None:
            await conn.execute(sa.text("INSERT INTO fault VALUES (:code)"), {"code": code})


@pytest.fixture
async def pg_store(pg_url: str, tmp_path) -> AsyncIterator[CaseStore]:
    async with migrated_store(pg_url, tmp_path) as case_store:
        yield case_store


TRANSIENT_CODES = {
    "40P01": "deadlock",
    "40001": "serialization failure",
    "57014": "statement timeout",
    "57P01": "admin shutdown",
    "57P03": "starting up or shutting down",
    "53300": "too many connections",
    "53200": "out of memory",
    "55P03": "lock not available",
    "08006": "connection failure",
}
REFUSAL_CODES = {"23514": "check violation", "23505": "unique violation", "22001": "too long", "22P02": "bad text"}


@pytest.mark.parametrize("code", sorted(TRANSIENT_CODES))
async def test_a_passing_postgresql_error_is_unavailable_and_the_event_is_stored_once_it_passes(
    pg_store: CaseStore, code: str
):
    await with_fault(pg_store)
    await set_fault(pg_store, code)
    with pytest.raises(StoreUnavailable, match=code):
        await pg_store.record(msg(1))
    await set_fault(pg_store, None)
    assert (await pg_store.record(msg(1))).new
    assert (await views_of(pg_store).count_events())["messages"] == 1


@pytest.mark.parametrize("code", sorted(REFUSAL_CODES))
async def test_a_constraint_or_data_error_is_a_refusal_not_retried(pg_store: CaseStore, code: str):
    await with_fault(pg_store)
    await set_fault(pg_store, code)
    with pytest.raises(StoreError, match=code) as caught:
        await pg_store.record(msg(1))
    assert not isinstance(caught.value, StoreUnavailable)


async def test_a_role_at_its_connection_limit_is_unavailable_until_a_slot_frees(pg_url: str, tmp_path):
    role = f"vigil_limited_{uuid.uuid4().hex[:8]}"
    database = sa.make_url(pg_url).database
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 1')
    try:
        owner = case_store(make_settings(tmp_path=tmp_path, db_url=pg_url))
        await owner.migrate()
        async with owner.engine.begin() as conn:
            await conn.exec_driver_sql(f'GRANT ALL ON ALL TABLES IN SCHEMA public TO "{role}"')
            await conn.exec_driver_sql(f'GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO "{role}"')
        await owner.close()
        limited_url = pg_url.replace("postgres@", f"{role}@")
        limited = case_store(make_settings(tmp_path=tmp_path, db_url=limited_url))
        try:
            slot = psycopg.connect(psycopg_url(limited_url))  # the role's one connection, held elsewhere
            try:
                with pytest.raises(StoreUnavailable, match="53300"):
                    await limited.record(msg(1))
                with pytest.raises(StoreUnavailable):
                    await views_of(limited).conversation("c-1")
            finally:
                slot.close()
            assert (await limited.record(msg(1))).new
        finally:
            await limited.close()
    finally:
        with psycopg.connect(PG_ADMIN.rsplit("/", 1)[0] + f"/{database}", autocommit=True) as conn:
            conn.execute(f'DROP OWNED BY "{role}"')
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP ROLE "{role}"')


# A sender's clock far ahead (issue 8, item 11).


def said(conversation: str, at: str) -> Event:
    return event(
        type="message",
        message_id=f"{conversation}-{at}",
        conversation_id=conversation,
        role="customer",
        sent_at=at,
        text="hi",
    )


async def test_an_event_time_far_ahead_counts_as_at_most_the_skew_ahead_for_its_conversation(db_url: str, tmp_path):
    from vigil.core.clock import ManualClock

    clock = ManualClock(datetime(2026, 11, 2, 9, 0, tzinfo=UTC))
    settings = make_settings(tmp_path=tmp_path, db_url=db_url, ingest={"future_skew_s": 3600})
    store = case_store(settings, clock=clock)
    views = views_of(store)
    await store.migrate()
    try:
        await store.record(said("pinned", "2999-01-01T00:00:00Z"))
        await store.record(said("a-little-ahead", "2026-11-02T09:30:00Z"))
        clock.advance(2 * 3600)
        await store.record(said("fresh", "2026-11-02T11:00:00Z"))

        pinned = await views.conversation("pinned")
        assert pinned is not None
        ten = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)  # the clock then, plus the skew of an hour
        assert (pinned.opened_at, pinned.updated_at, pinned.waiting_since) == (ten, ten, ten)
        assert pinned.messages[0].sent_at == datetime(2999, 1, 1, tzinfo=UTC)  # the message keeps the sender's time
        ahead = await views.conversation("a-little-ahead")
        assert ahead is not None and ahead.updated_at == datetime(2026, 11, 2, 9, 30, tzinfo=UTC)
        newest_first = [c.conversation_id for c in await views.recent_conversations()]
        assert newest_first == ["fresh", "pinned", "a-little-ahead"]

        closing = {"type": "case", "event_id": "pinned-closed", "conversation_id": "pinned", "event": "closed"}
        await store.record(event(**closing, at="2999-01-01T00:00:00Z"))
        closed = await views.conversation("pinned")
        twelve = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
        assert closed is not None and (closed.updated_at, closed.closed_at) == (twelve, twelve)
    finally:
        await store.close()


class _Keeper:
    """Writes a row per new event into a table of its own, in the event's transaction; fails on ``fail_on``."""

    name = "tally"

    def __init__(self, fail_on: str | None = None) -> None:
        self.fail_on = fail_on
        self.seen: list[str] = []

    async def keep(self, conn: Any, event: Event, case: Any) -> None:
        self.seen.append(event.id)
        if event.id == self.fail_on:
            raise ValueError("this keeper cannot keep that")
        await conn.execute(sa.text("INSERT INTO tally (event_id) VALUES (:id)"), {"id": event.id})


async def _tallied(store: CaseStore) -> list[str]:
    async with store.engine.connect() as conn:
        return [row[0] for row in await conn.execute(sa.text("SELECT event_id FROM tally ORDER BY event_id"))]


async def test_keepers_write_in_the_events_transaction_once_per_new_event(store: CaseStore):
    async with store.engine.begin() as conn:
        await conn.execute(sa.text("CREATE TABLE tally (event_id VARCHAR PRIMARY KEY)"))
    keeper = _Keeper()
    store.keep_with([keeper])
    commits: list[object] = []
    sa.event.listen(store.engine.sync_engine, "commit", commits.append)
    events = [msg(n, conversation=f"c-{n}") for n in range(10)]
    await asyncio.gather(*(store.record(e) for e in events))
    assert len(commits) == 1, "the keeper's writes did not share the batch's transaction"
    await asyncio.gather(*(store.record(e) for e in events))  # redelivered: not new, not kept again
    assert await _tallied(store) == sorted(e.id for e in events)
    assert len(keeper.seen) == 10


async def test_an_event_a_keeper_fails_on_is_refused_with_nothing_of_it_written(store: CaseStore, views: CaseViews):
    async with store.engine.begin() as conn:
        await conn.execute(sa.text("CREATE TABLE tally (event_id VARCHAR PRIMARY KEY)"))
    store.keep_with([_Keeper(fail_on="c-3-m3")])
    events = [msg(n, conversation=f"c-{n}") for n in range(6)]
    results = await asyncio.gather(*(store.record(e) for e in events), return_exceptions=True)
    assert isinstance(results[3], StoreError)
    assert all(not isinstance(r, BaseException) and r.new for i, r in enumerate(results) if i != 3)
    assert "c-3-m3" not in await _tallied(store)
    assert await views.conversation("c-3") is None, "the event was stored without what its keeper writes"


async def test_messages_of_many_conversations_that_move_their_cases_share_one_transaction(store: CaseStore):
    """The state machine's SQL runs with many rows at once: a batch that fails falls back to one event per
    transaction, which is correct but an order of magnitude slower (ingest fell to 88 events/s that way)."""
    for n in range(12):
        await store.record(msg(n, conversation=f"c-{n}"))
    commits: list[object] = []
    sa.event.listen(store.engine.sync_engine, "commit", commits.append)
    replies = [msg(100 + n, conversation=f"c-{n}", role="analyst") for n in range(12)]
    again = [msg(200 + n, conversation=f"c-{n}", role="customer") for n in range(12)]
    results = await asyncio.gather(*(store.record(e) for e in replies))
    assert len(commits) == 1
    assert {r.case.state for r in results if r.case} == {"waiting_on_customer"}
    results = await asyncio.gather(*(store.record(e) for e in again))
    assert len(commits) == 2
    assert {r.case.state for r in results if r.case} == {"waiting_on_analyst"}


async def test_a_store_closed_just_after_events_are_finished_notes_them_without_cutting_its_writer_short(
    db_url: str, tmp_path
):
    """The finished marks wait a moment for a batch to ride with; a store closed meanwhile writes them before its
    writer stops (cancelled mid-transaction, the writer's connection was reset under it: a traceback in the log)."""
    async with migrated_store(db_url, tmp_path) as store:
        events = [msg(n, conversation=f"c-{n}") for n in range(5)]
        await asyncio.gather(*(store.record(e) for e in events))
        for e in events:
            store.finished(e)
        await asyncio.sleep(0)  # the writer is waiting for a batch to ride with
        await store.close()
        assert store._flusher is None or store._flusher.done()
    async with migrated_store(db_url, tmp_path) as again, again.engine.connect() as conn:
        unfinished = (await conn.execute(sa.text("SELECT count(*) FROM message WHERE finished_at IS NULL"))).scalar()
    assert unfinished == 0


async def test_finished_marks_find_each_event_through_its_key_however_long_the_table(db_url: str, tmp_path):
    """A batch's marks cost as much as the batch, not the table: each row is found through the table's key (a
    row-value IN list made SQLite scan every message for every batch, and ingest slowed as the table grew)."""
    if not db_url.startswith("sqlite"):
        pytest.skip("the plan is checked where the scan was: SQLite")
    async with migrated_store(db_url, tmp_path) as store:
        events = [msg(n, conversation=f"c-{n % 3}") for n in range(6)]
        await asyncio.gather(*(store.record(e) for e in events))
        statements: list[str] = []
        sa.event.listen(
            store.engine.sync_engine,
            "before_cursor_execute",
            lambda conn, cursor, statement, *rest: statements.append(statement),
        )
        for e in events:
            store.finished(e)
        await store.record(msg(99, conversation="c-next"))  # the marks ride with this batch
        marks = [s for s in statements if s.lstrip().upper().startswith("UPDATE MESSAGE SET FINISHED_AT")]
        assert marks
        async with store.engine.connect() as conn:
            for statement in marks:
                params = tuple(None for _ in range(statement.count("?")))
                plan = " ".join(r[-1] for r in (await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", params)))
                assert "SCAN message" not in plan, plan
            unfinished = (
                await conn.execute(sa.text("SELECT count(*) FROM message WHERE finished_at IS NULL"))
            ).scalar()
        assert unfinished == 1  # the last one, not finished yet
