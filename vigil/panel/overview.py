"""The support lead's overview: suggestions shown and judged, answer latency, first response, knowledge size.

Everything is counted in fixed buckets of ``bucket_s`` seconds from ``since`` (floored to the second) up to
``until`` (exclusive); bucket times are UTC. Counts are aggregated in SQL; percentiles are taken in Python from at
most ``max_rows`` rows per series, newest first, so a huge window costs a bounded read.

How things are counted:

- *shown*: suggestions by the bucket of their ``created_at``.
- *verdicts*: each suggestion counts once, with its latest verdict (by ``at``, then arrival, then feedback id), in
  the bucket of that verdict's ``at``: an analyst who accepts and then dismisses counts as one dismissal, at the
  dismissal. So adjacent windows add up, and a past window changes when someone changes their mind later.
  ``approved`` counts as accepted and ``rejected`` as dismissed (the two verdicts on actions). Feedback on a
  suggestion vigil has no record of is left out (its kind and tenant are unknown).
- *rates*: accepted, edited and dismissed over the suggestions that got a verdict in that bucket; None without any.
- *answer latency*: p50 and p90 of ``latency_ms`` of ``answer`` suggestions (linear interpolation).
- *first response*: median of ``first_response_at - first_customer_at`` in seconds, for conversations by the
  bucket of ``first_customer_at``; a conversation without a response yet counts with its wait so far (to
  ``until``), so the median is then a lower bound (``unanswered`` says how many), never a figure that leaves the
  unanswered out; a response stamped before the customer's message (events out of order) is left out.
- *first response on target*: the same conversations against their SLA's first-response target, as the SLA clock
  counted it (its timer's due time: in the tenant's business hours where its SLA counts working time). ``met`` when
  an analyst answered by then; ``late`` when the answer came after it, or none came and it has passed (``until``);
  a conversation still inside its target, or without one (no SLA clock armed), is in neither.
- *knowledge size*: entries active now, by kind, created before each bucket's end and not expired by then (an entry
  may have an expiry). Removed entries are deleted and statuses keep no history, so the past is what is active
  today as it grew; it counts global entries and those of the tenants counted. *By source*, the same entries split
  into ``mined`` (learnt from the analysts' work: written by the miner from resolved cases, or an FAQ proposed from
  an analyst's edit or reply that a lead approved; ``LEARNED``) and ``imported`` (every other origin: the help
  centre's files): an entry the miner wrote counts from when it first did, and one a lead retired, or whose cases
  were all reopened, drops out of the past too.
- *learning* (the learning curve, week by week in the longest window): the cases the miner took as new evidence
  (copies of cases already counted and cases too thin to teach aside), by when it mined them; the mined FAQs served
  at each bucket's end, each from when the miner first wrote it as an FAQ; and the answers drawn first from mined
  knowledge, shown and judged as above, with their share of all the answers shown. Answers are read newest first,
  at most ``max_rows`` (as the percentiles are), and a suggestion counts as drawn from mined knowledge when its
  first source is learnt knowledge (``LEARNED``: an entry the miner wrote, or an approved edit or reply).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.cases import timers
from vigil.cases.tables import CONVERSATION, FEEDBACK, SUGGESTION, TIMER, first_source
from vigil.cases.views import CaseViews
from vigil.knowledge.store import LEARNED, MINED, visible_to
from vigil.knowledge.tables import ENTRY, FAQ_SINCE
from vigil.mining.tables import MINED_CASE
from vigil.panel.buckets import Buckets, Percentiles

MAX_ROWS = 50_000
SOURCES = ("mined", "imported")
"""Where knowledge comes from: learnt from the analysts' work (``LEARNED``: mined, or an approved edit or reply), or
imported (any other origin)."""
KINDS = ("answer", "next_step", "follow_up", "handover", "action", "escalation")
"""The order the overview shows the kinds vigil knows in (docs/wire-format.md); any other kind follows, by name."""
# What each verdict counts as: approving an action accepts it, rejecting one dismisses it.
VERDICTS = {
    "accepted": "accepted",
    "approved": "accepted",
    "edited": "edited",
    "dismissed": "dismissed",
    "rejected": "dismissed",
}


class Tally(BaseModel):
    """Suggestions shown and the verdicts on them; rates are over the suggestions that got a verdict."""

    shown: int = 0
    """Suggestions created."""
    accepted: int = 0
    """Latest verdicts ``accepted`` or ``approved``."""
    edited: int = 0
    """Latest verdicts ``edited``."""
    dismissed: int = 0
    """Latest verdicts ``dismissed`` or ``rejected``."""
    accept_rate: float | None = None
    """``accepted / (accepted + edited + dismissed)``; None without a verdict. Likewise the two below."""
    edit_rate: float | None = None
    dismiss_rate: float | None = None

    @classmethod
    def of(cls, shown: int, accepted: int, edited: int, dismissed: int) -> Tally:
        """A tally with its rates worked out."""
        judged = accepted + edited + dismissed
        rates = [n / judged if judged else None for n in (accepted, edited, dismissed)]
        counts = {"shown": shown, "accepted": accepted, "edited": edited, "dismissed": dismissed}
        return cls(**counts, accept_rate=rates[0], edit_rate=rates[1], dismiss_rate=rates[2])

    @classmethod
    def total(cls, tallies: Iterable[Tally]) -> Tally:
        """The sum of several tallies, with its own rates."""
        items = list(tallies)
        return cls.of(*(sum(getattr(t, f) for t in items) for f in ("shown", "accepted", "edited", "dismissed")))


class Totals(BaseModel):
    """The whole window at once (percentiles over all its rows, not over the buckets' values)."""

    suggestions: dict[str, Tally]
    all_kinds: Tally
    answer_latency_p50_ms: float | None
    answer_latency_p90_ms: float | None
    first_response_median_s: float | None
    conversations: int
    unanswered: int
    first_response_met: int
    first_response_late: int
    knowledge: dict[str, int]
    """Active entries by kind at ``until``."""
    knowledge_sources: dict[str, int]
    """Active entries by source (``SOURCES``) at ``until``."""


class Learning(BaseModel):
    """What the miner learned from resolved cases and what it was worth, one value per bucket: the learning curve."""

    cases_mined: list[int]
    """Cases the miner took as new evidence, by when it mined them (copies and thin cases aside)."""
    mined_faqs: list[int]
    """Mined FAQs served at each bucket's end, each from when the miner first wrote it as an FAQ."""
    answers: list[Tally]
    """Answer suggestions drawn first from mined knowledge: shown, and their latest verdicts."""
    share: list[float | None]
    """Of the answers shown in the bucket, the share drawn from mined knowledge (None: no answer shown)."""
    total_cases_mined: int
    total_answers: Tally
    total_share: float | None


class Overview(BaseModel):
    """The lead's overview of a window: series with one value per bucket (a None is a gap), and totals."""

    tenants: list[str] | None
    """The tenants counted; None for all."""
    since: datetime
    """The window's start (UTC, floored to the second): the first bucket's start."""
    until: datetime
    """The window's end (UTC, exclusive)."""
    bucket_s: int
    buckets: list[datetime]
    """Each bucket's start (UTC)."""
    suggestions: dict[str, list[Tally]]
    """Per suggestion kind with anything shown or judged in the window (in the wire format's order)."""
    all_kinds: list[Tally]
    """All kinds together."""
    answer_latency_p50_ms: list[float | None]
    answer_latency_p90_ms: list[float | None]
    first_response_median_s: list[float | None]
    conversations: list[int]
    """Conversations whose first customer message fell in the bucket."""
    unanswered: list[int]
    """Of those, the ones no analyst has answered yet."""
    first_response_met: list[int]
    """Of those, the ones answered within the SLA's first-response target."""
    first_response_late: list[int]
    """Of those, the ones answered after the target, or not answered and past it."""
    knowledge: dict[str, list[int]]
    """Per knowledge kind with an active entry by ``until``: active entries at each bucket's end."""
    knowledge_sources: dict[str, list[int]]
    """Per source (``SOURCES``, both always there): active entries at each bucket's end."""
    totals: Totals
    learning: Learning
    truncated: bool
    """A percentile series read only its newest ``max_rows`` rows: its older buckets and its total are None."""


class _Window(Buckets):
    """The window's buckets, and the tenants to count."""

    def __init__(self, since: datetime, until: datetime, bucket_s: int, tenants: Sequence[str] | None) -> None:
        super().__init__(since, until, bucket_s)
        self.tenants = list(tenants) if tenants is not None else None

    def of_tenants(self, column: Any) -> Any:
        """The SQL condition on a tenant column (true for all tenants)."""
        return sa.true() if self.tenants is None else column.in_(self.tenants)


async def overview(
    views: CaseViews,
    *,
    tenants: Sequence[str] | None,
    since: datetime,
    until: datetime,
    bucket_s: int,
    max_rows: int = MAX_ROWS,
) -> Overview:
    """The lead's overview of ``[since, until)`` in buckets of ``bucket_s`` seconds.

    Args:
        views: the cases to read.
        tenants: the tenants to count (None for all); knowledge size counts global entries and theirs.
        since: the window's start (aware; floored to the second), the first bucket's start.
        until: the window's end (aware, exclusive); the last bucket may be cut short by it.
        bucket_s: the bucket length in seconds; at most ``buckets.MAX_BUCKETS`` (1000) buckets.
        max_rows: how many rows a percentile series reads at most.

    Raises:
        ValueError: naive times, an empty window, or too many buckets.
        StoreUnavailable: the database could not be reached, or the reads took longer than the views' timeout.
        StoreError: the database refused a query.
    """
    w = _Window(since, until, bucket_s, tenants)
    async with views.reading() as conn:
        shown = await _counts(conn, _shown(w, conn.dialect.name))
        verdicts = await _counts(conn, _latest_verdicts(w, conn.dialect.name))
        latencies = await _newest(conn, _answer_latencies(w), max_rows)
        responses = await _newest(conn, _first_responses(w), max_rows)
        started = await _counts(conn, _started(w, conn.dialect.name))
        knowledge = await _knowledge(conn, w, ENTRY.c.kind)
        sources = await _knowledge(conn, w, _source())
        learned = await _learned(conn, w, max_rows)
    latency = Percentiles(w, latencies, max_rows, (0.5, 0.9))
    response = Percentiles(w, [(at, (answer - at).total_seconds()) for at, answer in responses], max_rows, (0.5,))
    sources = {source: sources.get(source, [0] * w.count) for source in SOURCES}
    kinds = _by_kind(w, shown, verdicts)
    report = _assemble(w, kinds, latency, response, started, knowledge, sources, learned.of(w, kinds.get("answer")))
    if learned.truncated:
        report.truncated = True
    return report


def _shown(w: _Window, dialect: str) -> sa.Subquery:
    s = SUGGESTION.c
    return (
        sa.select(w.sql(s.created_at, dialect).label("bucket"), s.kind)
        .where(w.holds(s.created_at), w.of_tenants(s.tenant))
        .subquery()
    )


def _ranked_verdicts(w: _Window) -> sa.Subquery:
    """The verdicts on every suggestion judged in the window, each with its rank, newest first (1: the latest)."""
    f = FEEDBACK.c
    order = (f.at.desc(), f.received_at.desc(), f.feedback_id.desc())
    return (
        sa.select(
            f.suggestion_id,
            f.verdict,
            f.at,
            sa.func.row_number().over(partition_by=f.suggestion_id, order_by=order).label("rank"),
        )
        .where(f.suggestion_id.in_(sa.select(f.suggestion_id).where(w.holds(f.at))))
        .subquery()
    )


def _latest_verdicts(w: _Window, dialect: str) -> sa.Subquery:
    """Each judged suggestion's latest verdict, if that verdict falls in the window: bucket, kind, verdict."""
    ranked = _ranked_verdicts(w)
    s = SUGGESTION.c
    return (
        sa.select(w.sql(ranked.c.at, dialect).label("bucket"), s.kind, ranked.c.verdict)
        .join_from(ranked, SUGGESTION, s.suggestion_id == ranked.c.suggestion_id)
        .where(ranked.c.rank == 1, w.holds(ranked.c.at), w.of_tenants(s.tenant))
        .subquery()
    )


def _started(w: _Window, dialect: str) -> sa.Subquery:
    """Conversations by the bucket of the customer's first message, whether anyone has answered, and whether the
    first response met its SLA target (``met``, ``late``, or NULL: inside it still, or no target)."""
    c, t = CONVERSATION.c, TIMER.c
    target = (
        sa.select(sa.func.min(t.due_at))
        .where(t.conversation_id == c.id, t.kind == timers.FIRST_RESPONSE)
        .scalar_subquery()
    )
    until = sa.literal(w.until, CONVERSATION.c.first_response_at.type)
    on_target = sa.case(
        (target.is_(None), sa.null()),
        (c.first_response_at <= target, "met"),
        (c.first_response_at.is_not(None), "late"),
        (target < until, "late"),
        else_=sa.null(),
    )
    return (
        sa.select(
            w.sql(c.first_customer_at, dialect).label("bucket"),
            c.first_response_at.is_not(None).label("answered"),
            on_target.label("on_target"),
        )
        .where(w.holds(c.first_customer_at), w.of_tenants(c.tenant))
        .subquery()
    )


def _answer_latencies(w: _Window) -> sa.Select[Any]:
    s = SUGGESTION.c
    return sa.select(s.created_at, s.latency_ms).where(
        s.kind == "answer", w.holds(s.created_at), w.of_tenants(s.tenant)
    )


def _first_responses(w: _Window) -> sa.Select[Any]:
    """When each conversation's customer first wrote, and when an analyst first answered; for one not answered yet,
    the window's end (the wait so far: a first response takes at least that long)."""
    c = CONVERSATION.c
    answered = sa.func.coalesce(c.first_response_at, sa.literal(w.until, CONVERSATION.c.first_response_at.type))
    return sa.select(c.first_customer_at, answered).where(
        w.holds(c.first_customer_at),
        w.of_tenants(c.tenant),
        sa.or_(c.first_response_at.is_(None), c.first_response_at >= c.first_customer_at),
    )


async def _counts(conn: AsyncConnection, rows: sa.Subquery) -> list[tuple[Any, ...]]:
    """``(bucket, *other columns, count)`` for each group of equal rows."""
    columns = list(rows.c)
    result = await conn.execute(sa.select(*columns, sa.func.count()).group_by(*columns))
    return [tuple(row) for row in result]


async def _newest(conn: AsyncConnection, rows: sa.Select[Any], max_rows: int) -> list[tuple[datetime, Any]]:
    """At most ``max_rows + 1`` rows, newest first by their first column (one more tells there were more)."""
    first = rows.selected_columns[0]
    result = await conn.execute(rows.order_by(first.desc()).limit(max_rows + 1))
    return [(row[0], row[1]) for row in result]


@dataclass
class _Learned:
    """The learning curve's rows, read: bucket indices of cases mined, FAQs' starts, mined answers and verdicts."""

    cases: list[tuple[Any, ...]]
    faq_starts: list[datetime]
    shown: list[int]
    """The bucket of each answer drawn from mined knowledge."""
    verdicts: list[tuple[int, str]]
    """The bucket and latest verdict of each judged answer drawn from mined knowledge."""
    truncated: bool

    def of(self, w: _Window, answers: list[Tally] | None) -> Learning:
        cases = [0] * w.count
        for bucket, n in self.cases:
            cases[w.clamp(bucket)] += int(n)
        ends = [min(start + w.step, w.until) for start in w.starts]
        faqs = [sum(1 for since in self.faq_starts if since < end) for end in ends]
        # Tallied as every kind is: one row per answer shown, one per latest verdict.
        shown = [(bucket, "answer", 1) for bucket in self.shown]
        judged = [(bucket, "answer", verdict, 1) for bucket, verdict in self.verdicts]
        tallies = _by_kind(w, shown, judged).get("answer", [Tally()] * w.count)
        every = answers or [Tally()] * w.count
        total, every_total = Tally.total(tallies), Tally.total(every)
        return Learning(
            cases_mined=cases,
            mined_faqs=faqs,
            answers=tallies,
            share=[t.shown / a.shown if a.shown else None for t, a in zip(tallies, every, strict=True)],
            total_cases_mined=sum(cases),
            total_answers=total,
            total_share=total.shown / every_total.shown if every_total.shown else None,
        )


async def _learned(conn: AsyncConnection, w: _Window, max_rows: int) -> _Learned:
    """The learning curve's rows (see the module's doc)."""
    m = MINED_CASE.c
    mined = (
        sa.select(w.sql(m.mined_at, conn.dialect.name).label("bucket"))
        .where(m.outcome == "mined", m.reason.is_(None), w.holds(m.mined_at), w.of_tenants(m.tenant))
        .subquery()
    )
    cases = await _counts(conn, mined)
    e = ENTRY.c
    faqs = await conn.execute(
        sa.select(e.created_at, e.expires_at, e.provenance).where(
            e.origin == MINED, e.kind == "faq", e.status == "active", visible_to(w.tenants), e.created_at < w.until
        )
    )
    starts = [
        _faq_start(row.created_at, (row.provenance or {}).get(FAQ_SINCE))
        for row in faqs
        if row.expires_at is None or row.expires_at > w.until
    ]
    s = SUGGESTION.c
    answers = sa.select(s.created_at, s.sources).where(
        s.kind == "answer", w.holds(s.created_at), w.of_tenants(s.tenant)
    )
    shown = list(await conn.execute(answers.order_by(s.created_at.desc()).limit(max_rows + 1)))
    judged = list(await conn.execute(_latest_answer_verdicts(w).limit(max_rows + 1)))
    truncated = len(shown) > max_rows or len(judged) > max_rows
    shown, judged = shown[:max_rows], judged[:max_rows]
    firsts = {first_source(row.sources) for row in (*shown, *judged)} - {None}
    from_mined = await _mined_ids(conn, sorted(str(i) for i in firsts))
    return _Learned(
        cases=cases,
        faq_starts=[start for start in starts if start is not None],
        shown=[w.index(row.created_at) for row in shown if first_source(row.sources) in from_mined],
        verdicts=[(w.index(row.at), row.verdict) for row in judged if first_source(row.sources) in from_mined],
        truncated=truncated,
    )


def _latest_answer_verdicts(w: _Window) -> sa.Select[Any]:
    """Each judged answer's latest verdict, if it falls in the window, with the answer's sources (newest first)."""
    ranked = _ranked_verdicts(w)
    s = SUGGESTION.c
    return (
        sa.select(ranked.c.at, ranked.c.verdict, s.sources)
        .join_from(ranked, SUGGESTION, s.suggestion_id == ranked.c.suggestion_id)
        .where(ranked.c.rank == 1, w.holds(ranked.c.at), w.of_tenants(s.tenant), s.kind == "answer")
        .order_by(ranked.c.at.desc())
    )


async def _mined_ids(conn: AsyncConnection, ids: Sequence[str]) -> set[str]:
    """Of ``ids``, the entries learnt from the analysts' work."""
    found: set[str] = set()
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        rows = await conn.execute(
            sa.select(ENTRY.c.id).where(ENTRY.c.id.in_(chunk), ENTRY.c.origin.in_(sorted(LEARNED)))
        )
        found.update(rows.scalars())
    return found


def _faq_start(created_at: datetime, since: Any) -> datetime | None:
    """When a mined entry became an FAQ: its provenance says (from issue 27 on), else from when it was written."""
    if not isinstance(since, str):
        return created_at
    try:
        moment = datetime.fromisoformat(since)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _source() -> sa.ColumnElement[str]:
    """An entry's source, as SQL: ``mined`` or ``imported``."""
    return sa.case((ENTRY.c.origin.in_(sorted(LEARNED)), SOURCES[0]), else_=SOURCES[1])


async def _knowledge(conn: AsyncConnection, w: _Window, group: sa.ColumnElement[Any]) -> dict[str, list[int]]:
    """Active knowledge entries by ``group`` (their kind, or their source) at each bucket's end (the last one ends
    at ``until``): each counts from the bucket it was created in until the one it expired in (if it has an expiry)."""
    e = ENTRY.c
    # An entry that expired before it was written was never served.
    active = sa.and_(
        e.status == "active", visible_to(w.tenants), sa.or_(e.expires_at.is_(None), e.expires_at > e.created_at)
    )
    label = group.label("part")
    sizes: dict[str, list[int]] = defaultdict(lambda: [0] * w.count)
    for moment, sign in ((e.created_at, 1), (e.expires_at, -1)):
        before = sa.select(label, sa.func.count()).where(active, moment < w.since).group_by(label)
        for name, n in await conn.execute(before):
            series = sizes[name]
            for i in range(w.count):
                series[i] += sign * int(n)
        within = sa.select(w.sql(moment, conn.dialect.name).label("bucket"), label).where(active, w.holds(moment))
        for bucket, name, n in await _counts(conn, within.subquery()):
            series = sizes[name]
            for i in range(w.clamp(bucket), w.count):
                series[i] += sign * int(n)
    return dict(sorted(sizes.items()))


def _by_kind(w: _Window, shown: list[tuple[Any, ...]], verdicts: list[tuple[Any, ...]]) -> dict[str, list[Tally]]:
    """Per suggestion kind (the kinds with any data), a tally per bucket."""
    outcomes = ("accepted", "edited", "dismissed")
    counts: dict[str, list[list[int]]] = {}  # kind -> [shown, accepted, edited, dismissed], each per bucket

    def of(kind: str) -> list[list[int]]:
        return counts.setdefault(kind, [[0] * w.count for _ in range(4)])

    for bucket, kind, n in shown:
        of(kind)[0][w.clamp(bucket)] += n
    for bucket, kind, verdict, n in verdicts:
        if verdict in VERDICTS:
            of(kind)[1 + outcomes.index(VERDICTS[verdict])][w.clamp(bucket)] += n
    order = sorted(counts, key=lambda k: (KINDS.index(k) if k in KINDS else len(KINDS), k))
    return {kind: [Tally.of(*(c[i] for c in counts[kind])) for i in range(w.count)] for kind in order}


def _assemble(
    w: _Window,
    kinds: dict[str, list[Tally]],
    latency: Percentiles,
    response: Percentiles,
    started: list[tuple[Any, ...]],
    knowledge: dict[str, list[int]],
    sources: dict[str, list[int]],
    learning: Learning,
) -> Overview:
    conversations, unanswered = [0] * w.count, [0] * w.count
    on_target: dict[str, list[int]] = {"met": [0] * w.count, "late": [0] * w.count}
    for bucket, answered, outcome, n in started:
        conversations[w.clamp(bucket)] += n
        if not answered:
            unanswered[w.clamp(bucket)] += n
        if outcome in on_target:
            on_target[outcome][w.clamp(bucket)] += n
    all_kinds = [Tally.total(series[i] for series in kinds.values()) for i in range(w.count)]
    totals = Totals(
        suggestions={kind: Tally.total(series) for kind, series in kinds.items()},
        all_kinds=Tally.total(all_kinds),
        answer_latency_p50_ms=latency.totals[0],
        answer_latency_p90_ms=latency.totals[1],
        first_response_median_s=response.totals[0],
        conversations=sum(conversations),
        unanswered=sum(unanswered),
        first_response_met=sum(on_target["met"]),
        first_response_late=sum(on_target["late"]),
        knowledge={kind: sizes[-1] for kind, sizes in knowledge.items()},
        knowledge_sources={source: sizes[-1] for source, sizes in sources.items()},
    )
    return Overview(
        tenants=w.tenants,
        since=w.since,
        until=w.until,
        bucket_s=w.bucket_s,
        buckets=w.starts,
        suggestions=kinds,
        all_kinds=all_kinds,
        answer_latency_p50_ms=latency.series[0],
        answer_latency_p90_ms=latency.series[1],
        first_response_median_s=response.series[0],
        conversations=conversations,
        unanswered=unanswered,
        first_response_met=on_target["met"],
        first_response_late=on_target["late"],
        knowledge=knowledge,
        knowledge_sources=sources,
        totals=totals,
        learning=learning,
        truncated=latency.truncated or response.truncated,
    )
