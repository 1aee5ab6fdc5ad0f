"""The lead overview on SQLite and PostgreSQL: counts, latest verdicts, rates, percentiles, response, knowledge."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.conftest import case_store, make_settings, views_of
from vigil.cases.store import CaseStore
from vigil.core.errors import EventConflict, StoreUnavailable
from vigil.knowledge.tables import ENTRY, FAQ_SINCE
from vigil.mining.tables import MINED_CASE
from vigil.panel.overview import Overview, Tally, overview
from vigil.panel.windows import DEFAULT, WINDOWS, fitting, oldest_record
from vigil.wire.events import CaseEvent, Feedback, Message, SourceRef, Suggestion

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
HOUR = 3600


def at(hours: float = 0, *, s: float = 0) -> datetime:
    return T0 + timedelta(hours=hours, seconds=s)


async def suggest(
    store: CaseStore,
    sid: str,
    when: datetime,
    kind: str = "answer",
    latency_ms: float = 10.0,
    tenant: str = "acme",
    source: str | None = None,
) -> None:
    # A suggestion is made in a conversation vigil knows (and a verdict on it is only taken there).
    opened = {"event_id": f"open-{sid}", "event": "opened", "at": when, "tenant": tenant}
    await store.record(
        CaseEvent.model_validate({"type": "case", "schema_version": 1, "conversation_id": f"conv-{sid}", **opened})
    )
    await store.save_suggestion(
        Suggestion(
            suggestion_id=sid,
            conversation_id=f"conv-{sid}",
            tenant=tenant,
            created_at=when,
            kind=kind,  # type: ignore[arg-type]
            text="Try this",
            confidence=0.8,
            latency_ms=latency_ms,
            sources=[SourceRef(kind="faq", id=source)] if source else [],
        )
    )


async def judge(store: CaseStore, sid: str, verdict: str, when: datetime, n: int = 0) -> None:
    await store.record(
        Feedback(
            type="feedback",
            schema_version=1,
            feedback_id=f"fb-{sid}-{n}",
            suggestion_id=sid,
            conversation_id=f"conv-{sid}",
            verdict=verdict,  # type: ignore[arg-type]
            at=when,
        )
    )


async def say(store: CaseStore, conversation: str, role: str, when: datetime, tenant: str = "acme") -> None:
    await store.record(
        Message(
            type="message",
            schema_version=1,
            message_id=f"{conversation}-{role}-{when.isoformat()}",
            conversation_id=conversation,
            tenant=tenant,
            role=role,  # type: ignore[arg-type]
            sent_at=when,
            text="hello",
        )
    )


async def add_entry(
    store: CaseStore,
    entry_id: str,
    kind: str,
    when: datetime,
    status: str = "active",
    origin: str = "test",
    tenant: str | None = None,
    expires: datetime | None = None,
    provenance: dict[str, object] | None = None,
) -> None:
    row = {
        "id": entry_id,
        "kind": kind,
        "title": entry_id,
        "body": "body",
        "origin": origin,
        "tenant": tenant,
        "expires_at": expires,
        "tags": [],
        "questions": [],
        "digest": entry_id,
        "status": status,
        "created_at": when,
        "updated_at": when,
        "provenance": provenance,
    }
    async with store.engine.begin() as conn:
        await conn.execute(sa.insert(ENTRY), [row])


async def three_hours(store: CaseStore, tenants: list[str] | None = None, **extra: object) -> Overview:
    return await overview(views_of(store), tenants=tenants, since=T0, until=at(3), bucket_s=HOUR, **extra)  # type: ignore[arg-type]


def column(tallies: list[Tally], name: str) -> list[object]:
    return [getattr(t, name) for t in tallies]


async def test_suggestions_are_counted_by_kind_and_each_counts_its_latest_verdict_once(store: CaseStore):
    await suggest(store, "a1", at(s=600), latency_ms=100)
    await suggest(store, "a2", at(s=1200), latency_ms=300)
    await suggest(store, "a3", at(1, s=300), latency_ms=200)
    await suggest(store, "n1", at(1, s=1800), kind="next_step", latency_ms=5)
    await judge(store, "a1", "accepted", at(s=900))
    await judge(store, "a2", "edited", at(s=1500))
    await judge(store, "a2", "dismissed", at(1, s=600), n=1)  # changed their mind: one dismissal, in the second hour
    await judge(store, "a3", "accepted", at(1, s=360))
    await judge(store, "n1", "approved", at(1, s=2400))  # approving an action accepts it
    with pytest.raises(EventConflict, match="unknown_conversation"):
        await judge(store, "ghost", "accepted", at(s=60))  # in a conversation vigil never saw: refused
    ghost = {"type": "feedback", "schema_version": 1, "feedback_id": "fb-ghost", "suggestion_id": "ghost"}
    # A suggestion vigil never made, in a conversation it knows: stored, but of no kind, so counted nowhere.
    await store.record(
        Feedback.model_validate({**ghost, "conversation_id": "conv-a1", "verdict": "accepted", "at": at(s=60)})
    )

    view = await three_hours(store)

    assert view.buckets == [at(0), at(1), at(2)]
    assert list(view.suggestions) == ["answer", "next_step"]
    answer = view.suggestions["answer"]
    assert column(answer, "shown") == [2, 1, 0]
    assert column(answer, "accepted") == [1, 1, 0]
    assert column(answer, "edited") == [0, 0, 0]
    assert column(answer, "dismissed") == [0, 1, 0]
    assert column(answer, "accept_rate") == [1.0, 0.5, None]
    assert column(answer, "dismiss_rate") == [0.0, 0.5, None]
    assert column(view.suggestions["next_step"], "accepted") == [0, 1, 0]
    assert column(view.all_kinds, "shown") == [2, 2, 0]
    assert column(view.all_kinds, "accept_rate") == [1.0, pytest.approx(2 / 3), None]
    totals = view.totals.suggestions["answer"]
    assert (totals.shown, totals.accepted, totals.edited, totals.dismissed) == (3, 2, 0, 1)
    assert totals.accept_rate == pytest.approx(2 / 3) and totals.edit_rate == 0.0
    assert view.totals.all_kinds.accepted == 3


async def test_a_verdict_changed_after_the_window_counts_in_the_later_window(store: CaseStore):
    await suggest(store, "a1", at(s=60))
    await judge(store, "a1", "accepted", at(s=120))
    await judge(store, "a1", "dismissed", at(3, s=60), n=1)
    earlier = await three_hours(store)
    later = await overview(views_of(store), tenants=None, since=at(3), until=at(4), bucket_s=HOUR)
    assert earlier.totals.all_kinds.shown == 1
    assert (earlier.totals.all_kinds.accepted, earlier.totals.all_kinds.dismissed) == (0, 0)
    assert earlier.totals.all_kinds.accept_rate is None
    assert later.totals.all_kinds.shown == 0 and later.totals.all_kinds.dismissed == 1


async def test_answer_latency_percentiles_per_bucket_and_overall(store: CaseStore):
    for n, (hours, ms) in enumerate([(0, 100), (0, 300), (0, 200), (0, 400), (1, 50)]):
        await suggest(store, f"a{n}", at(hours, s=60 + n), latency_ms=ms)
    await suggest(store, "x", at(s=30), kind="next_step", latency_ms=9000)  # not an answer
    view = await three_hours(store)
    # [100, 200, 300, 400]: p50 between 200 and 300, p90 at 0.7 of the way from 300 to 400
    assert view.answer_latency_p50_ms == [250.0, 50.0, None]
    assert view.answer_latency_p90_ms == [pytest.approx(370.0), 50.0, None]
    assert view.totals.answer_latency_p50_ms == 200.0
    assert view.totals.answer_latency_p90_ms == pytest.approx(360.0)
    assert not view.truncated


async def test_a_bounded_read_leaves_the_buckets_it_could_not_finish_empty(store: CaseStore):
    for n, hours in enumerate([0, 1, 1, 2, 2]):
        await suggest(store, f"a{n}", at(hours, s=60 + n), latency_ms=10 * (n + 1))
    view = await three_hours(store, max_rows=3)
    # the newest three rows: both of hour 2 and one of hour 1, so hour 1 may be missing rows
    assert view.truncated
    assert view.answer_latency_p50_ms == [None, None, 45.0]
    assert view.totals.answer_latency_p50_ms is None
    assert column(view.all_kinds, "shown") == [1, 2, 2]  # counts are not bounded


async def test_time_to_first_response_by_the_bucket_of_the_first_customer_message(store: CaseStore):
    conversations = {
        "c1": (at(0), at(0, s=60)),  # on the window's start edge: 60 s
        "c2": (at(0, s=1800), at(0, s=1980)),  # 180 s
        "c3": (at(0, s=3599.9995), at(1, s=9.9995)),  # a hair before the hour: still the first bucket, 10 s
        "c4": (at(1), None),  # on an edge, unanswered
        "c5": (at(2, s=3599), at(3, s=1)),  # 2 s
        "c6": (at(3), at(3, s=5)),  # at ``until``: outside
        "c7": (at(0, s=-1), at(0, s=30)),  # before ``since``: outside
    }
    for name, (customer, analyst) in conversations.items():
        await say(store, name, "customer", customer)
        if analyst is not None:
            await say(store, name, "analyst", analyst)
    await say(store, "c2", "customer", at(0, s=1900))  # a second customer message changes nothing
    view = await three_hours(store)
    # The unanswered one counts with its wait so far (to ``until``, 2 hours): never left out of the median.
    assert view.first_response_median_s == [pytest.approx(60.0), pytest.approx(7200.0), pytest.approx(2.0)]
    assert view.conversations == [3, 1, 1]
    assert view.unanswered == [0, 1, 0]
    assert view.totals.first_response_median_s == pytest.approx(60.0)  # [2, 10, 60, 180, at least 7200]
    assert (view.totals.conversations, view.totals.unanswered) == (5, 1)


async def test_knowledge_size_grows_with_active_entries_for_every_tenant(store: CaseStore):
    await add_entry(store, "faq-old", "faq", at(-1))
    await add_entry(store, "art-1", "article", at(0, s=1800))
    await add_entry(store, "faq-edge", "faq", at(1, s=3599))
    await add_entry(store, "faq-on-edge", "faq", at(2))  # created at the second bucket's end: the third bucket
    await add_entry(store, "draft", "article", at(1, s=1800), status="draft")
    await add_entry(store, "faq-later", "faq", at(3, s=1))
    view = await three_hours(store, tenants=["nobody"])
    assert view.knowledge == {"article": [1, 1, 1], "faq": [1, 2, 3]}
    assert view.totals.knowledge == {"article": 1, "faq": 3}


async def test_knowledge_growth_is_split_into_mined_and_imported(store: CaseStore):
    await add_entry(store, "help-old", "article", at(-1), origin="knowledge/articles/hub.md")
    await add_entry(store, "case-1", "case", at(0, s=600), origin="miner", tenant="acme")
    await add_entry(store, "case-2", "faq", at(1, s=600), origin="miner", tenant="acme")
    await add_entry(store, "case-3", "case", at(2, s=600), origin="miner", tenant="acme", status="pending_review")
    await add_entry(store, "case-4", "case", at(2, s=900), origin="miner", tenant="acme", status="retired")
    await add_entry(store, "case-globex", "case", at(2, s=900), origin="miner", tenant="globex")
    await add_entry(store, "help-new", "faq", at(2, s=1200), origin="knowledge/faqs/billing.md")
    # An analyst's reply a lead approved is learnt too; one waiting for review is not served.
    await add_entry(store, "reply-1", "faq", at(2, s=1300), origin="reply", tenant="acme")
    await add_entry(store, "edit-1", "faq", at(2, s=1400), origin="edit", tenant="acme", status="pending_review")
    acme = await three_hours(store, tenants=["acme"])
    assert acme.knowledge_sources == {"mined": [1, 2, 3], "imported": [1, 1, 2]}  # only what is served counts
    assert acme.totals.knowledge_sources == {"mined": 3, "imported": 2}
    assert sum(acme.totals.knowledge.values()) == sum(acme.totals.knowledge_sources.values())
    everyone = await three_hours(store)
    assert everyone.knowledge_sources["mined"] == [1, 2, 4]
    nothing_mined = await three_hours(store, tenants=["initech"])
    assert nothing_mined.knowledge_sources == {"mined": [0, 0, 0], "imported": [1, 1, 2]}


async def mined_case(store: CaseStore, cid: str, when: datetime, reason: str | None = None, tenant: str = "acme"):
    row = {"conversation_id": cid, "tenant": tenant, "closed_at": when, "mined_at": when, "entry_id": "case-x"}
    outcome = "skipped" if reason == "thin" else "mined"
    async with store.engine.begin() as conn:
        await conn.execute(sa.insert(MINED_CASE), [{**row, "outcome": outcome, "reason": reason}])


async def test_the_learning_curve_counts_cases_mined_faqs_formed_and_answers_drawn_from_them(store: CaseStore):
    # Cases the miner took, by when it mined them: a copy of a counted case and a thin one are no new evidence.
    await mined_case(store, "c1", at(0, s=60))
    await mined_case(store, "c2", at(0, s=120))
    await mined_case(store, "c2-copy", at(0, s=180), reason="repeat")
    await mined_case(store, "c3", at(1, s=60), reason="thin")
    await mined_case(store, "c4", at(2, s=60))
    await mined_case(store, "g1", at(2, s=60), tenant="globex")
    # A mined entry became an FAQ in the second hour, though written in the first; another was one before.
    await add_entry(
        store,
        "case-a",
        "faq",
        at(0, s=10),
        origin="miner",
        tenant="acme",
        provenance={FAQ_SINCE: at(1, s=5).isoformat()},
    )
    await add_entry(store, "case-b", "faq", at(-2), origin="miner", tenant="acme")  # before issue 27: its creation
    await add_entry(store, "faq-help", "faq", at(-2), origin="knowledge/faqs/x.md")  # imported: not learned
    await add_entry(store, "reply-a", "faq", at(-2), origin="reply", tenant="acme")  # an analyst's reply, approved
    # Answers drawn from a mined entry, from the help centre, from an approved reply, and judged.
    await suggest(store, "s1", at(0, s=300), source="case-a")
    await suggest(store, "s2", at(0, s=400), source="faq-help")
    await suggest(store, "s3", at(2, s=300), source="case-b")
    await suggest(store, "s4", at(2, s=400), source="case-a")
    await suggest(store, "s5", at(2, s=500))  # no source
    await suggest(store, "s6", at(1, s=500), source="reply-a")
    await judge(store, "s1", "accepted", at(0, s=900))
    await judge(store, "s3", "dismissed", at(2, s=900))
    await judge(store, "s4", "edited", at(2, s=950))
    await judge(store, "s2", "accepted", at(2, s=960))
    view = await three_hours(store, tenants=["acme"])
    learned = view.learning
    assert learned.cases_mined == [2, 0, 1] and learned.total_cases_mined == 3
    assert learned.mined_faqs == [1, 2, 2]  # the miner's FAQs
    assert column(learned.answers, "shown") == [1, 1, 2]
    assert column(learned.answers, "accepted") == [1, 0, 0]
    assert column(learned.answers, "edited") == [0, 0, 1]
    assert column(learned.answers, "dismissed") == [0, 0, 1]
    assert learned.share == [0.5, 1.0, pytest.approx(2 / 3)]
    assert learned.total_answers.shown == 4 and learned.total_share == pytest.approx(4 / 6)
    everyone = await three_hours(store)
    assert everyone.learning.cases_mined == [2, 0, 2]


async def test_an_entry_counts_until_it_expires(store: CaseStore):
    await add_entry(store, "case-gone", "case", at(-2), origin="miner", expires=at(-1))  # gone before the window
    await add_entry(store, "case-old", "case", at(-1), origin="miner", expires=at(1, s=600))
    await add_entry(store, "case-brief", "case", at(1, s=60), origin="miner", expires=at(1, s=120))
    await add_entry(store, "case-new", "case", at(0, s=60), origin="miner", expires=at(9))
    await add_entry(store, "case-stale", "case", at(0, s=60), origin="miner", expires=at(-3))  # never served
    view = await three_hours(store)
    assert view.knowledge == {"case": [2, 1, 1]}
    assert view.knowledge_sources == {"mined": [2, 1, 1], "imported": [0, 0, 0]}


async def test_tenants_see_only_their_own(store: CaseStore):
    for tenant in ("acme", "globex"):
        await suggest(store, f"{tenant}-1", at(s=60), tenant=tenant, latency_ms=100 if tenant == "acme" else 900)
        await judge(store, f"{tenant}-1", "accepted" if tenant == "acme" else "dismissed", at(s=120))
        await say(store, f"{tenant}-c", "customer", at(s=10), tenant=tenant)
        await say(store, f"{tenant}-c", "analyst", at(s=10 + (30 if tenant == "acme" else 90)), tenant=tenant)
    await suggest(store, "globex-2", at(1, s=60), tenant="globex")

    acme = await three_hours(store, ["acme"])
    assert column(acme.all_kinds, "shown") == [1, 0, 0]
    assert (acme.totals.all_kinds.accepted, acme.totals.all_kinds.dismissed) == (1, 0)
    assert acme.totals.answer_latency_p50_ms == 100.0 and acme.totals.first_response_median_s == 30.0
    assert acme.tenants == ["acme"]
    globex = await three_hours(store, ["globex"])
    assert column(globex.all_kinds, "shown") == [1, 1, 0] and globex.totals.all_kinds.dismissed == 1
    assert globex.totals.first_response_median_s == 90.0
    both = await three_hours(store, None)
    assert both.totals.all_kinds.shown == 3 and both.totals.conversations == 2
    nobody = await three_hours(store, [])
    assert nobody.suggestions == {} and nobody.totals.conversations == 0


async def test_an_empty_window_has_buckets_and_no_values(store: CaseStore):
    view = await three_hours(store)
    assert len(view.buckets) == 3 and view.suggestions == {} and view.knowledge == {}
    assert view.all_kinds == [Tally()] * 3
    assert view.answer_latency_p50_ms == [None] * 3 and view.first_response_median_s == [None] * 3
    assert view.conversations == [0, 0, 0] and view.unanswered == [0, 0, 0]
    assert view.totals.all_kinds == Tally() and view.totals.answer_latency_p90_ms is None
    assert not view.truncated


async def test_the_last_bucket_is_cut_short_by_until_and_since_is_floored_to_the_second(store: CaseStore):
    await suggest(store, "in", at(1, s=1799.9))
    await suggest(store, "out", at(1, s=1800))
    await suggest(store, "first", at(0))
    since = (T0 + timedelta(microseconds=700_000)).astimezone(timezone(timedelta(hours=2)))  # 11:00:00.7 at +02:00
    view = await overview(views_of(store), tenants=None, since=since, until=at(1, s=1800), bucket_s=HOUR)
    assert view.since == T0 and view.buckets == [at(0), at(1)]
    assert column(view.all_kinds, "shown") == [1, 1]


async def test_minute_buckets_keep_a_row_a_hair_before_the_minute_in_its_minute(store: CaseStore):
    await suggest(store, "a", at(0, s=59.9999))
    await suggest(store, "b", at(0, s=60))
    await suggest(store, "c", at(5, s=1799.9999))
    await suggest(store, "d", at(11, s=3599))
    view = await overview(views_of(store), tenants=None, since=T0, until=at(12), bucket_s=60)
    shown = column(view.all_kinds, "shown")
    assert len(shown) == 720 and shown[:2] == [1, 1] and shown[329] == 1 and shown[-1] == 1 and sum(shown) == 4


@pytest.mark.parametrize(
    ("since", "until", "bucket_s", "problem"),
    [
        (T0.replace(tzinfo=None), at(1), 60, "timezone-aware"),
        (at(1), at(1), 60, "after since"),
        (T0, at(1), 0, "at least 1"),
        (T0, at(24), 60, "buckets"),
    ],
)
async def test_a_window_that_makes_no_sense_is_refused(
    store: CaseStore, since: datetime, until: datetime, bucket_s: int, problem: str
):
    with pytest.raises(ValueError, match=problem):
        await overview(views_of(store), tenants=None, since=since, until=until, bucket_s=bucket_s)


async def test_an_unreachable_database_is_store_unavailable(tmp_path: Path):
    settings = make_settings(tmp_path=tmp_path, db_url="postgresql+asyncpg://postgres@127.0.0.1:1/none")
    store = case_store(settings)
    try:
        with pytest.raises(StoreUnavailable):
            await three_hours(store)
    finally:
        await store.close()


# ---- which window the overview opens on when none is asked for ----


@pytest.mark.parametrize(
    ("age", "window", "bucket_s"),
    [
        (timedelta(minutes=5), "15m", 15),
        (timedelta(minutes=15), "15m", 15),
        (timedelta(minutes=20), "1h", 60),
        (timedelta(hours=1), "1h", 60),
        (timedelta(hours=1, seconds=1), "24h", 3600),
        (timedelta(days=2), "7d", 6 * 3600),
        (timedelta(days=8), "30d", 86400),
        (timedelta(days=31), "26w", 7 * 86400),
        (timedelta(days=400), "26w", 7 * 86400),
    ],
)
def test_the_default_window_is_the_shortest_that_reaches_back_to_the_oldest_record(
    age: timedelta, window: str, bucket_s: int
):
    chosen = fitting(T0 - age, T0)
    assert (chosen.name, chosen.bucket_s) == (window, bucket_s) and chosen is WINDOWS[window]


def test_with_nothing_to_count_the_overview_opens_on_a_day():
    assert fitting(None, T0) is DEFAULT is WINDOWS["24h"]


def test_every_window_has_a_few_dozen_buckets():
    assert [w.name for w in WINDOWS.values()] == ["15m", "1h", "24h", "7d", "30d", "26w"]
    assert all(24 <= w.span.total_seconds() / w.bucket_s <= 60 for w in WINDOWS.values())


async def test_the_oldest_record_is_a_suggestion_verdict_or_conversation_of_the_tenants_in_the_longest_window(
    store: CaseStore,
):
    now = datetime.now(UTC).replace(microsecond=0)  # a message is stored no later than the clock
    assert await oldest_record(views_of(store), None, now) is None
    await suggest(store, "old", now - timedelta(days=200), tenant="acme")  # before the longest window
    await suggest(store, "later", now + timedelta(minutes=5), tenant="acme")  # after now (a skewed clock)
    await suggest(store, "recent", now - timedelta(minutes=7), tenant="acme")
    assert await oldest_record(views_of(store), ["acme"], now) == now - timedelta(minutes=7)
    await judge(store, "old", "accepted", now - timedelta(hours=3))  # a verdict, today, on an old suggestion
    assert await oldest_record(views_of(store), ["acme"], now) == now - timedelta(hours=3)
    await say(store, "globex-c", "customer", now - timedelta(days=3), tenant="globex")
    await say(store, "globex-c", "customer", now - timedelta(minutes=1), tenant="globex")
    assert await oldest_record(views_of(store), ["globex"], now) == now - timedelta(days=3)
    assert await oldest_record(views_of(store), None, now) == now - timedelta(days=3)
    assert await oldest_record(views_of(store), ["acme"], now) == now - timedelta(hours=3)
    assert await oldest_record(views_of(store), [], now) is None
    assert fitting(await oldest_record(views_of(store), ["acme"], now), now).name == "24h"


async def test_first_responses_are_counted_against_the_sla_target_as_its_clock_ran(tmp_path: Path, db_url: str):
    from tests.progress import test_skill as skill
    from vigil.core.clock import ManualClock
    from vigil.testing import wired

    # First response within 10 minutes (tests/progress/test_skill.py): its timer's due time is the target.
    async with wired(tmp_path, settings=skill.settings(tmp_path, db_url), clock=ManualClock(skill.T0)) as vigil:
        for name, (asked, answered) in {
            "met": (0, 5),
            "late": (0, 15),
            "waiting": (1, None),  # not answered, and its target passed: late
            "inside": (18, None),  # not answered, still inside its target: neither
        }.items():
            await vigil.send(skill.say(1, "customer", "My router keeps dropping the connection", asked, name))
            if answered is not None:
                await vigil.send(skill.say(2, "analyst", "Sorry about that, let me look at it.", answered, name))
        await vigil.advance(skill.at(20))
        view = await overview(vigil.views, tenants=None, since=skill.T0, until=skill.at(20), bucket_s=HOUR)
    assert (view.totals.first_response_met, view.totals.first_response_late) == (1, 2)
    assert view.first_response_met == [1] and view.first_response_late == [2]
    assert (view.totals.conversations, view.totals.unanswered) == (4, 2)
