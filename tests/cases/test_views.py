"""What the panel and the API read of the cases, on SQLite and PostgreSQL: conversations a page at a time, newest
first, however long; the queue, its previews and each reader's unread suggestions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from tests.cases.test_store import case, event, msg, suggestion
from vigil.cases.store import CaseStore
from vigil.cases.views import CaseViews
from vigil.db.schema import UTCDateTime


async def test_the_queue_keeps_those_waiting_longest_whatever_its_limit(store: CaseStore, views: CaseViews):
    await store.record(msg(1, conversation="waits-longest"))  # 09:00:01, unanswered
    await store.record(msg(5, conversation="waits"))  # 09:00:05, unanswered
    for n, conversation in ((7, "answered-earlier"), (9, "answered-later")):
        await store.record(msg(n, conversation=conversation))
        await store.record(msg(n + 1, conversation=conversation, role="analyst"))

    async def queue(limit: int) -> list[str]:
        return [item.conversation_id for item in await views.queue(tenants=None, reader=None, limit=limit)]

    assert await queue(10) == ["waits-longest", "waits", "answered-later", "answered-earlier"]
    assert await queue(1) == ["waits-longest"]  # the least recently updated, and the first to keep


async def test_the_queue_shows_each_reader_what_was_suggested_since_they_last_read(store: CaseStore, views: CaseViews):
    await store.record(msg(1))
    await store.record(msg(1, conversation="c-2", tenant="acme"))
    later = suggestion("s-2", "c-1-m1").model_copy(update={"created_at": datetime(2026, 11, 2, 9, 5, tzinfo=UTC)})
    for made in (suggestion("s-1", "c-1-m1"), later, suggestion("s-3", "c-1-m1")):
        await store.save_suggestion(made)
    await store.mark_published(["s-1", "s-2"])  # s-3 is not out yet

    async def unread(reader: str | None) -> dict[str, list[str]]:
        return {
            item.conversation_id: item.unread_suggestions for item in await views.queue(tenants=None, reader=reader)
        }

    assert await unread("ana") == {"c-1": ["s-1", "s-2"], "c-2": []}
    assert await views.mark_read("ana", "c-1", datetime(2026, 11, 2, 9, 2, tzinfo=UTC), tenants=None)
    assert (await unread("ana"))["c-1"] == ["s-2"]
    assert (await unread("bo"))["c-1"] == ["s-1", "s-2"]
    # A mark never moves back; another tenant's or an unknown conversation is not marked.
    assert await views.mark_read("ana", "c-1", datetime(2026, 11, 2, 9, 1, tzinfo=UTC), tenants=None)
    assert not await views.mark_read("ana", "c-1", datetime(2026, 11, 2, 9, 9, tzinfo=UTC), tenants=["acme"])
    assert not await views.mark_read("ana", "nope", datetime(2026, 11, 2, 9, 9, tzinfo=UTC), tenants=None)
    assert (await unread("ana"))["c-1"] == ["s-2"]
    # A verdict, by anyone, settles a suggestion for everyone.
    verdict = {"type": "feedback", "feedback_id": "f-1", "suggestion_id": "s-2", "conversation_id": "c-1"}
    await store.record(event(**verdict, verdict="dismissed", at="2026-11-02T09:06:00Z"))
    assert (await unread("bo"))["c-1"] == ["s-1"]
    assert (await unread(None))["c-1"] == ["s-1"]
    assert (await unread("ana"))["c-1"] == []


async def test_unknown_conversation_is_none(store: CaseStore, views: CaseViews):
    assert await views.conversation("nope") is None


# ---- a conversation is read a page at a time, newest first, however long it is ----
HUGE = 100_000
SUGGESTIONS = 1_200
AT = datetime(2026, 11, 2, 9, 0, 0, tzinfo=UTC)


async def bulk_conversation(store: CaseStore) -> None:
    """One conversation of HUGE messages and SUGGESTIONS suggestions, written with SQL (the pipeline would take
    minutes); the first message goes through the store, so that the conversation's row is what vigil writes."""
    await store.record(msg(0, conversation="huge"))
    at = sa.bindparam("at", AT, type_=UTCDateTime())
    numbers = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :last) "
    messages = sa.text(
        "INSERT INTO message (message_id, conversation_id, sent_at, received_at, role, text) "
        f"{numbers}SELECT 'huge-m' || i, 'huge', :at, :at, 'customer', 'message ' || i FROM n"
    ).bindparams(at, sa.bindparam("last", HUGE - 1))
    # Suggestions made in pairs at the same instant: the cursor must tell them apart by id.
    suggestions = sa.text(
        "INSERT INTO suggestion (suggestion_id, conversation_id, tenant, created_at, kind, text, confidence, "
        f"sources, latency_ms) {numbers}SELECT 's-' || i, 'huge', 'default', :at, 'answer', 'Try this', 0.5, "
        "'[]', 1.0 FROM n"
    ).bindparams(at, sa.bindparam("last", SUGGESTIONS))
    # And other conversations around it, as in any real database, so that the planner has to find this one's rows.
    others = sa.text(
        "INSERT INTO message (message_id, conversation_id, sent_at, received_at, role, text) "
        f"{numbers}SELECT 'o-m' || i, 'other-' || (i % 200), :at, :at, 'customer', 'hi' FROM n"
    ).bindparams(at, sa.bindparam("last", 20_000))
    other_suggestions = sa.text(
        "INSERT INTO suggestion (suggestion_id, conversation_id, tenant, created_at, kind, text, confidence, "
        f"sources, latency_ms) {numbers}SELECT 'o-' || i, 'other-' || (i % 200), 'default', :at, 'answer', 'Hm', "
        "0.5, '[]', 1.0 FROM n"
    ).bindparams(at, sa.bindparam("last", 20_000))
    async with store.engine.begin() as conn:
        for statement in (messages, suggestions, others, other_suggestions):
            await conn.execute(statement)
        # Spread the suggestions over time, two per instant; the other conversations' over the same span, as
        # conversations that run at the same time.
        seconds = f"(CASE WHEN conversation_id = 'huge' THEN {{n}} ELSE {{n}} % {SUGGESTIONS} END) / 2"
        n = "CAST(substr(suggestion_id, 3) AS integer)"
        if conn.dialect.name == "postgresql":
            spread = f"UPDATE suggestion SET created_at = created_at + ({seconds.format(n=n)}) * interval '1 second'"
        else:
            spread = (
                # In the form SQLAlchemy writes (microseconds), which the store's comparisons rely on.
                "UPDATE suggestion SET created_at = strftime('%Y-%m-%d %H:%M:%S', created_at, "
                f"'+' || ({seconds.format(n=n)}) || ' seconds') || '.000000'"
            )
        await conn.execute(sa.text(spread))
        if conn.dialect.name == "postgresql":  # as autovacuum would; vigil never analyses SQLite, so neither do we
            await conn.execute(sa.text("ANALYZE"))


async def test_a_huge_conversation_is_read_a_page_at_a_time_newest_first(store: CaseStore, views: CaseViews):
    await bulk_conversation(store)

    first = await views.conversation("huge")
    assert first is not None and first.message_count == 1  # written behind the pipeline's back, as intended
    assert [m.message_id for m in first.messages] == [f"huge-m{n}" for n in range(HUGE - 1, HUGE - 51, -1)]
    assert len(first.suggestions) == 50 and first.suggestions[0].suggestion_id == f"s-{SUGGESTIONS}"
    assert first.older is not None

    seen_messages: list[str] = []
    seen_suggestions: list[str] = []
    before: str | None = None
    pages = 0
    while True:
        page = await views.conversation("huge", limit=500, before=before)
        assert page is not None
        pages += 1
        assert len(page.messages) <= 500 and len(page.suggestions) <= 500  # never more than a page
        seen_messages += [m.message_id for m in page.messages]
        seen_suggestions += [s.suggestion_id for s in page.suggestions]
        times = [s.created_at for s in page.suggestions]
        assert times == sorted(times, reverse=True)
        if page.older is None:
            break
        before = page.older
    assert pages == HUGE // 500
    # Every message exactly once, newest first, through to the very first.
    assert seen_messages == [f"huge-m{n}" for n in range(HUGE - 1, -1, -1)]
    assert len(set(seen_messages)) == HUGE
    assert sorted(seen_suggestions) == sorted(f"s-{n}" for n in range(1, SUGGESTIONS + 1))
    assert len(set(seen_suggestions)) == SUGGESTIONS


async def test_a_page_of_a_huge_conversation_is_read_through_an_index(store: CaseStore, views: CaseViews):
    from vigil.cases import paging
    from vigil.cases.tables import MESSAGE, SUGGESTION

    await bulk_conversation(store)
    page = await views.conversation("huge", limit=100)
    assert page is not None and page.older is not None
    position = paging.Position.decode(page.older)
    queries = {
        "messages": paging.messages_page(MESSAGE, "huge", position, 100),
        "suggestions": paging.suggestions_page(SUGGESTION, "huge", position, 100),
    }
    async with store.engine.connect() as conn:
        dialect = conn.dialect
        for name, query in queries.items():
            sql = str(query.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
            if dialect.name == "postgresql":
                # With its parameters bound as the store binds them (typed), not as literals (cast to text).
                compiled = query.compile(dialect=dialect)
                params = tuple(compiled.params[name] for name in compiled.positiontup or ())
                rows = (await conn.exec_driver_sql(f"EXPLAIN {compiled}", params)).all()
                plan = "\n".join(r[0] for r in rows)
                assert "Index Scan" in plan and "Sort" not in plan and "Seq Scan" not in plan, (name, plan)
            else:
                plan = "\n".join(r[-1] for r in (await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}")).all())
                assert "USING INDEX" in plan or "USING COVERING INDEX" in plan, (name, plan)
                assert "TEMP B-TREE" not in plan, (name, plan)


async def test_a_page_holds_the_latest_verdict_on_each_of_its_suggestions(store: CaseStore, views: CaseViews):
    await store.record(msg(0))
    for n in range(3):
        await store.save_suggestion(
            suggestion(f"s-{n}", "c-1-m0").model_copy(update={"created_at": AT.replace(second=n)})
        )
    for n, (sid, verdict) in enumerate([("s-0", "dismissed"), ("s-2", "edited"), ("s-2", "accepted")]):
        base = {"type": "feedback", "feedback_id": f"f-{n}", "suggestion_id": sid, "conversation_id": "c-1"}
        await store.record(event(**base, verdict=verdict, at=f"2026-11-02T10:00:0{n}Z", text="x"))

    newest = await views.conversation("c-1", limit=2)
    assert newest is not None
    assert [s.suggestion_id for s in newest.suggestions] == ["s-2", "s-1"]
    assert [(f.suggestion_id, f.verdict) for f in newest.feedback] == [("s-2", "accepted")]
    older = await views.conversation("c-1", limit=2, before=newest.older)
    assert older is not None and older.older is None
    assert [s.suggestion_id for s in older.suggestions] == ["s-0"]
    assert [(f.suggestion_id, f.verdict) for f in older.feedback] == [("s-0", "dismissed")]
    assert older.messages == []  # the one message came on the first page


@pytest.mark.parametrize(
    "cursor", ["not-base64!", "e30", "bm90IGpzb24", "eyJtIjoiMSIsInMiOm51bGwsIm1kIjpmYWxzZSwic2QiOmZhbHNlfQ"]
)
async def test_a_cursor_no_page_gave_is_refused(store: CaseStore, views: CaseViews, cursor: str):
    from vigil.core.errors import InvalidCursor

    await store.record(msg(0))
    with pytest.raises(InvalidCursor):
        await views.conversation("c-1", before=cursor)


# ---- the queue's rows: who the customer is and what was said last ---------------------------------------------


async def test_a_queue_row_names_the_customer_and_previews_the_last_message(store: CaseStore, views: CaseViews):
    await store.record(msg(1, conversation="named", author="Ada Lovelace"))
    await store.record(msg(2, conversation="named", author="Ada L."))  # the latest customer message with an author
    await store.record(msg(3, conversation="named"))  # no author: the name stays
    await store.record(msg(4, conversation="named", role="analyst", author="ana"))  # not the customer's name
    long = "Ünïcødé 🙂 " * 20  # 200 characters, many of them more than one byte, some outside the BMP
    await store.record(msg(5, conversation="long", text=long))
    await store.record(msg(6, conversation="closed", author="Gone"))
    await store.record(case(1, "closed", conversation="closed"))

    rows = {item.conversation_id: item for item in await views.queue(tenants=None, reader=None)}
    assert set(rows) == {"named", "long"}  # only the listed conversations
    named = rows["named"]
    assert named.customer_name == "Ada L."
    assert named.last_message is not None
    assert (named.last_message.role, named.last_message.text) == ("analyst", "message 4")
    assert named.last_message.sent_at == datetime(2026, 11, 2, 9, 0, 4, tzinfo=UTC)
    assert rows["long"].customer_name is None
    preview = rows["long"].last_message
    assert preview is not None and preview.role == "customer"
    assert preview.text == " ".join(long[:140].split()) + "…"
    assert len(preview.text) <= 141


async def test_a_short_last_message_is_previewed_whole_and_a_conversation_without_messages_has_none(
    store: CaseStore,
    views: CaseViews,
):
    await store.record(msg(1, conversation="short", text="Where is my\n  parcel?"))
    await store.record(case(1, "opened", conversation="quiet"))
    rows = {item.conversation_id: item for item in await views.queue(tenants=None, reader=None)}
    assert rows["short"].last_message is not None
    assert rows["short"].last_message.text == "Where is my parcel?"  # whitespace run together, no ellipsis
    assert (rows["quiet"].customer_name, rows["quiet"].last_message) == (None, None)


async def test_the_customer_name_is_read_from_an_index_of_named_messages_however_many_are_unnamed(
    store: CaseStore,
    views: CaseViews,
):
    from vigil.cases.views import _latest_messages

    await bulk_conversation(store)  # a huge conversation whose customer never gives a name: the worst case
    rows = {item.conversation_id: item for item in await views.queue(tenants=None, reader=None)}
    assert rows["huge"].customer_name is None
    async with store.engine.connect() as conn:
        # The plan of the query as the store sends it: with its parameters bound, not written in as literals.
        compiled = _latest_messages(["huge"]).compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
        params = tuple(compiled.params[name] for name in compiled.positiontup or ())
        if conn.dialect.name == "postgresql":
            await conn.exec_driver_sql("ANALYZE message")
            plan = "\n".join(r[0] for r in (await conn.exec_driver_sql(f"EXPLAIN {compiled}", params)).all())
        else:
            explained = await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}", params)
            plan = "\n".join(r[-1] for r in explained.all())
    assert "ix_message_named_customer" in plan, plan
