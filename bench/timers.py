"""Timer-load benchmark (issue 13): reminders on time with 100,000 open timers, and what the timers cost the daemon.

For each database (``--db``), on a Tansu broker and a fresh database of the benchmark's own, ``vigil run`` in its
own process (default settings, the bundled help centre as its knowledge) goes through these phases:

1. **No timers** (``before``): customer questions, each in a new conversation, at ``--rate`` a second for
   ``--baseline-s``. Suggestion latency = answer consumed from the suggestions topic - question produced (as
   ``bench.answers`` measures it), with vigil's processing time (``vigil_event_processing_seconds``) and
   produce-to-stored time (``bench.watcher``) beside it.
2. **Load**, vigil stopped: ``--timers`` running timers, less those of the window, written with
   ``vigil.cases.timers.arm`` itself (batches of 5,000), with the open commitments their commitment timers time
   (``vigil.cases.progress.add_commitments``): a resolution clock and a response clock (first or next response) per
   conversation over ``--conversations``, the rest commitments, falling due from 30 minutes to a day ahead
   (``shapes``, ``materialise``).
3. **Firing** (``firing``), vigil started again: the ``--in-window`` timers left are armed (batches of 500) to fire
   (their warning, their due time, or both) at moments spread evenly over the next ``--window-s`` seconds, while
   the questions go on at the same rate. vigil's own sweep fires them (every ``VIGIL_PROGRESS__SWEEP_S``). Lateness
   of each firing due in the window = the ``warned_at`` / ``fired_at`` vigil stored - the moment it was due; also
   the reminder's arrival on the suggestions topic - that moment (SLA warnings, commitments' reminders and misses:
   an SLA timer's due time only counts a breach), and vigil's ``vigil_timer_lateness_seconds`` histogram.
4. **No timers again** (``after``): the benchmark's timers and commitments deleted (vigil stopped), vigil started
   again, questions as in 1. The firing phase's latency is compared with the mean of ``before`` and ``after``,
   which spreads the machine's drift over the run.

The bulk load and the clean-up are done with vigil stopped so that what is measured is vigil with the timers, not
the benchmark's own writes holding SQLite's one write lock.

Run: ``python -m bench.timers [--timers 100000] [--db sqlite|postgresql|sqlite,postgresql]`` (about 8 minutes a
database) or ``--quick`` (a 45 s window of 600 timers, 20 s baselines: about 4 minutes a database).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import json
import math
import random
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from aiokafka import AIOKafkaConsumer
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.ext.asyncio import AsyncEngine

from bench import databases, report, traffic
from bench.answers import KNOWLEDGE_PATHS, Asked, question_set, question_stream
from bench.daemon import VigilProcess
from bench.linux import MachineTimes
from bench.metrics import Histogram, Snapshot
from bench.watcher import StoreWatcher
from vigil.cases import progress, timers
from vigil.cases.progress import Commitment
from vigil.cases.tables import COMMITMENT, TIMER
from vigil.cases.timers import Arm
from vigil.db.engine import create_engine
from vigil.dev.broker import EmbeddedBroker
from vigil.flow.skills import keyed, suggestion_id
from vigil.progress import sla
from vigil.progress.reminders import COMMITMENT as COMMITMENT_KIND
from vigil.progress.settings import DEFAULT_SLA, ProgressSettings
from vigil.transport.kafka import ensure_topics
from vigil.transport.settings import KafkaSettings

TARGET_LATENESS_P99_S = 1.0
TARGET_LATENCY_RATIO = 1.2
"""Issue 13: the daemon's message latency with the timers firing, within 20% of its latency without."""
PREFIX = "tl"
"""The benchmark's conversations: ``tl-000042``."""
TENANTS = ("brightwave", "copperleaf", "southerly")
PRIORITIES = ("urgent", "high", None, None, "low")
"""A case's priority, drawn uniformly: None (normal) twice as often as the others."""
PROMISES = (
    "send you the refund confirmation",
    "check with billing and get back to you",
    "update you on the replacement shipment",
    "call you back about the outage",
    "confirm the new delivery date",
)
BATCH = 5_000
LATENESS = "vigil_timer_lateness_seconds"
QUIET_SLA = json.dumps(
    {
        **{t: {p: v.model_dump() for p, v in by.items()} for t, by in DEFAULT_SLA.items()},
        "brightwave": {"*": {"first_response_s": 86_400.0}},
    }
)
"""vigil's SLA targets, but a day to first response for the questions' tenant: each question is a new conversation
whose first-response clock would otherwise warn 5 minutes later, so the questions of one phase would fire timers
(as many a second as questions were sent) in a later one, the baseline after the window among them."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What one benchmark run does."""

    timers: int = 100_000
    conversations: int = 30_000
    in_window: int = 3_000
    """Timers that fire during the window (their warning, their due time, or both)."""
    window_s: float = 180.0
    rate: float = 20.0
    """Customer questions a second, in every phase."""
    baseline_s: float = 60.0
    databases: tuple[str, ...] = ("sqlite",)
    partitions: int = 6
    seed: int = 13
    settings: tuple[tuple[str, str], ...] = ()


QUICK = Plan(in_window=600, window_s=45.0, baseline_s=20.0)


# --- the load ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Shape:
    """One timer of the load, before its times are set: whose it is, what it times, and where in its span it falls
    (``place`` in [0, 1))."""

    index: int
    conversation_id: str
    tenant: str
    kind: str
    priority: str | None
    place: float
    in_window: bool
    warned: bool
    """Whether it is armed with a warning (else only its due time)."""


def shapes(plan: Plan) -> list[Shape]:
    """The load's timers: a resolution clock per conversation, then a response clock (first or next response) per
    conversation, then commitments on random conversations, up to ``plan.timers``; ``plan.in_window`` of them,
    chosen at random, fire during the window. Reproducible from ``plan.seed``."""
    rng = random.Random(plan.seed)
    conversations = [f"{PREFIX}-{n:06d}" for n in range(plan.conversations)]
    tenant = {c: TENANTS[n % len(TENANTS)] for n, c in enumerate(conversations)}
    priority = {c: rng.choice(PRIORITIES) for c in conversations}
    kinds: list[tuple[str, str]] = []
    for c in conversations:
        kinds.append((c, sla.RESOLUTION))
    for n, c in enumerate(conversations):
        kinds.append((c, sla.FIRST_RESPONSE if n % 2 else sla.NEXT_RESPONSE))
    while len(kinds) < plan.timers:
        kinds.append((rng.choice(conversations), COMMITMENT_KIND))
    kinds = kinds[: plan.timers]
    firing = set(rng.sample(range(len(kinds)), min(plan.in_window, len(kinds))))
    return [
        Shape(
            index=i,
            conversation_id=c,
            tenant=tenant[c],
            kind=kind,
            priority=None if kind == COMMITMENT_KIND else priority[c],
            place=rng.random(),
            in_window=i in firing,
            warned=rng.random() < 0.6,
        )
        for i, (c, kind) in enumerate(kinds)
    ]


_SPAN_S = {
    sla.FIRST_RESPONSE: 3600.0,
    sla.NEXT_RESPONSE: 3600.0,
    sla.RESOLUTION: 24 * 3600.0,
    COMMITMENT_KIND: 8 * 3600.0,
}
"""How far past ``background_from`` a timer that does not fire in the window may fall due, by kind."""


def lead_s(shape: Shape, settings: ProgressSettings, promised_s: float) -> float:
    """How long before its due time ``shape`` warns, as vigil/progress/sla.py and skill.py work it out."""
    if shape.kind == COMMITMENT_KIND:
        return min(settings.remind_before_s, promised_s / 2)
    target = getattr(settings.targets(shape.tenant, shape.priority), f"{shape.kind}_s")
    return float(min(settings.warn_before_s, target / 2))


def materialise(
    shape: Shape, *, background_from: datetime, window_start: datetime, window_s: float, settings: ProgressSettings
) -> tuple[Arm, Commitment | None]:
    """The timer to arm for ``shape`` (and its commitment): a timer of the window fires (warns, or falls due if it
    has no warning) at ``window_start + place * window_s``; any other falls due after ``background_from``, warning
    included, within its kind's span."""
    promised_s = 4 * 3600.0 + shape.place * 20 * 3600.0
    lead = lead_s(shape, settings, promised_s)
    if shape.in_window:
        first = window_start + timedelta(seconds=shape.place * window_s)
        due = first + timedelta(seconds=lead) if shape.warned else first
    else:
        due = background_from + timedelta(seconds=lead + shape.place * _SPAN_S[shape.kind])
    warn = due - timedelta(seconds=lead) if shape.warned and lead > 0 else None
    commitment = None
    if shape.kind == COMMITMENT_KIND:
        made = due - timedelta(seconds=promised_s)
        message_id = f"{shape.conversation_id}-m{shape.index}"
        commitment = Commitment(
            commitment_id=f"{message_id}#1",
            conversation_id=shape.conversation_id,
            message_id=message_id,
            tenant=shape.tenant,
            what=PROMISES[shape.index % len(PROMISES)],
            made_at=made,
            due_at=due,
        )
        timer_id, started = f"{shape.conversation_id}/commitment/{commitment.commitment_id}", made
        ref: str | None = commitment.commitment_id
    else:
        target = getattr(settings.targets(shape.tenant, shape.priority), f"{shape.kind}_s")
        started = due - timedelta(seconds=target)
        timer_id, ref = sla.timer_id(shape.conversation_id, shape.kind, started), None
    arm = Arm(
        timer_id=timer_id,
        conversation_id=shape.conversation_id,
        tenant=shape.tenant,
        kind=shape.kind,
        started_at=started,
        due_at=due,
        warn_at=warn,
        ref=ref,
        priority=shape.priority,
    )
    return arm, commitment


@dataclass(frozen=True, slots=True)
class Firing:
    """A moment a timer should fire: its warning or its due time."""

    timer_id: str
    conversation_id: str
    kind: str
    stage: str
    at: datetime

    @property
    def speaks(self) -> bool:
        """Whether vigil publishes a reminder for it (an SLA timer's due time only counts a breach)."""
        return self.stage == timers.WARN or self.kind == COMMITMENT_KIND

    @property
    def suggestion_id(self) -> str:
        """The id of the reminder vigil publishes for it (vigil/flow/pipeline.py's ``announce``)."""
        return suggestion_id(keyed(self.conversation_id, f"{self.timer_id}/{self.stage}"))


def firings(arms: Iterable[Arm], start: datetime, end: datetime) -> list[Firing]:
    """Every warning and due time of ``arms`` from ``start`` up to ``end``, soonest first."""
    out = []
    for a in arms:
        for stage, at in ((timers.WARN, a.warn_at), (timers.DUE, a.due_at)):
            if at is not None and start <= at <= end:
                out.append(Firing(a.timer_id, a.conversation_id, a.kind, stage, at))
    return sorted(out, key=lambda f: f.at)


def lateness(expected: Sequence[Firing], fired: dict[tuple[str, str], datetime | None]) -> tuple[list[float], int]:
    """Seconds each expected firing came after its moment (``fired``: when vigil fired each timer's stage, None for
    not yet), and how many did not fire at all. Early firings count as 0 late, as vigil's histogram counts them."""
    late, missing = [], 0
    for f in expected:
        at = fired.get((f.timer_id, f.stage))
        if at is None:
            missing += 1
        else:
            late.append(max(0.0, (at - f.at).total_seconds()))
    return late, missing


def within(histogram: Histogram, bound: float) -> float:
    """The share of ``histogram``'s observations at or under ``bound`` (one of its buckets' bounds)."""
    if not histogram.total:
        return math.nan
    return histogram.counts[histogram.bounds.index(bound)] / histogram.total


def spread(values: Sequence[float]) -> dict[str, float]:
    """Count, p50, p99 and max of ``values`` (NaN for none)."""
    return {
        "n": float(len(values)),
        "p50": report.percentile(list(values), 0.50),
        "p99": report.percentile(list(values), 0.99),
        "max": max(values, default=math.nan),
    }


async def load(
    engine: AsyncEngine, arms: Sequence[Arm], commitments: Sequence[Commitment], batch: int = BATCH
) -> float:
    """Arm ``arms`` and store ``commitments``, a transaction per batch; returns the seconds it took."""
    started = time.monotonic()
    for n in range(0, max(len(arms), len(commitments)), batch):
        async with engine.begin() as conn:
            await progress.add_commitments(conn, commitments[n : n + batch])
            await timers.arm(conn, arms[n : n + batch])
    return time.monotonic() - started


async def fired_at(engine: AsyncEngine, timer_ids: Sequence[str]) -> dict[tuple[str, str], datetime | None]:
    """When vigil fired each stage of these timers (``warned_at``, ``fired_at``)."""
    out: dict[tuple[str, str], datetime | None] = {}
    c = TIMER.c
    async with engine.connect() as conn:
        for n in range(0, len(timer_ids), 500):
            rows = await conn.execute(
                sa.select(c.timer_id, c.warned_at, c.fired_at).where(c.timer_id.in_(timer_ids[n : n + 500]))
            )
            for row in rows:
                out[(row.timer_id, timers.WARN)] = row.warned_at
                out[(row.timer_id, timers.DUE)] = row.fired_at
    return out


async def forget(engine: AsyncEngine) -> None:
    """Delete the benchmark's timers and commitments."""
    async with engine.begin() as conn:
        await conn.execute(sa.delete(TIMER).where(TIMER.c.conversation_id.like(f"{PREFIX}-%")))
        await conn.execute(sa.delete(COMMITMENT).where(COMMITMENT.c.conversation_id.like(f"{PREFIX}-%")))


async def running_timers(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        found = await conn.execute(
            sa.select(sa.func.count()).select_from(TIMER).where(TIMER.c.status == timers.RUNNING)
        )
        return int(found.scalar() or 0)


# --- vigil and its suggestions -----------------------------------------------------------------------------------


class Suggestions:
    """Reads the suggestions topic in the background: when each answer (by the question it replies to) and each
    reminder (by its suggestion id) arrived."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=10,
        )
        self.replies: dict[str, float] = {}
        self.reminders: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._consumer.start()
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            batches = await self._consumer.getmany(timeout_ms=100)
            now = time.time()
            for records in batches.values():
                for record in records:
                    suggestion = json.loads(record.value or b"{}")
                    if suggestion.get("in_reply_to"):
                        self.replies.setdefault(str(suggestion["in_reply_to"]), now)
                    elif suggestion.get("kind") == "follow_up":
                        self.reminders.setdefault(str(suggestion.get("suggestion_id")), now)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._consumer.stop()


def lateness_histogram(text: str) -> Histogram:
    """vigil's ``vigil_timer_lateness_seconds`` from its ``/metrics`` text."""
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == f"{LATENESS}_bucket":
                buckets[float(sample.labels["le"])] = sample.value
    bounds = tuple(sorted(buckets))
    return Histogram(bounds, tuple(buckets[b] for b in bounds))


@dataclass(frozen=True, slots=True)
class Feed:
    """Where the questions go and where the suggestions are read."""

    bootstrap: str
    topic: str
    suggestions: Suggestions
    questions: Iterator[tuple[str, str]]
    """The question set, cycled: every phase goes on where the one before stopped."""
    rate: float


async def _metrics_text(vigil: VigilProcess) -> str:
    async with httpx.AsyncClient(timeout=5.0) as client:
        response = await client.get(f"http://127.0.0.1:{vigil.port}/metrics")
        response.raise_for_status()
        return response.text


async def questions(vigil: VigilProcess, feed: Feed, db_url: str, *, name: str, seconds: float) -> dict[str, Any]:
    """Questions at the feed's rate for ``seconds``, then until vigil has handled them and
    their answers have come: the message latencies of the phase."""
    asked: dict[str, Asked] = {}
    before = await vigil.snapshot()
    cpu, machine, start = vigil.cpu_seconds(), MachineTimes.now(), time.monotonic()
    watcher = StoreWatcher(db_url)
    watcher.start()
    stream = question_stream(f"{name}-{uuid.uuid4().hex[:6]}", feed.questions, asked)
    try:
        sent, produce_s = await traffic.produce_paced(
            feed.bootstrap, feed.topic, stream, rate=feed.rate, duration_s=seconds
        )
        after = await _until_handled(vigil, before.handled + sent, timeout_s=120)
        await asyncio.sleep(1.5)  # the last answers
    finally:
        watcher.stop()
    cores = (vigil.cpu_seconds() - cpu) / (time.monotonic() - start)
    waited = [feed.suggestions.replies[m] - q.at for m, q in asked.items() if m in feed.suggestions.replies]
    processing = after.processing - before.processing
    row = {
        "phase": name,
        "sent": sent,
        "achieved_rate": sent / produce_s,
        "answered": len(waited),
        "suggestion_p50_ms": report.percentile(waited, 0.5) * 1000,
        "suggestion_p99_ms": report.percentile(waited, 0.99) * 1000,
        "processing_p50_ms": processing.quantile(0.5) * 1000,
        "processing_p99_ms": processing.quantile(0.99) * 1000,
        "stored_p50_ms": report.percentile(watcher.to_visible_s, 0.5) * 1000,
        "stored_p99_ms": report.percentile(watcher.to_visible_s, 0.99) * 1000,
        "vigil_cores": cores,
        "machine_cores": MachineTimes.now().busy_cores_since(machine),
        "dead_lettered": after.dead_lettered - before.dead_lettered,
    }
    _progress(
        f"{name}: {sent} questions, {len(waited)} answered, suggestion p50/p99 {row['suggestion_p50_ms']:.0f}/"
        f"{row['suggestion_p99_ms']:.0f} ms, processing p50 {row['processing_p50_ms']:.1f} ms, vigil {cores:.2f} "
        f"cores, machine {row['machine_cores']:.2f}"
    )
    return row


async def one_database(
    plan: Plan, broker: EmbeddedBroker, kind: str, workdir: Path, profile: Path | None
) -> dict[str, Any]:
    """Every phase on a fresh database of ``kind``. The bulk load and the clean-up are done with vigil stopped (a
    restart between phases), so that what is measured is vigil with the timers, not the benchmark writing them."""
    settings = ProgressSettings()
    everything = shapes(plan)
    here = workdir / kind
    here.mkdir(parents=True, exist_ok=True)
    with databases.fresh(kind, here) as db_url:
        topic = f"timers-{kind}-{uuid.uuid4().hex[:8]}"
        await ensure_topics(
            KafkaSettings(bootstrap_servers=broker.bootstrap),
            [topic, f"{topic}.suggestions", f"{topic}.dlq"],
            partitions=plan.partitions,
        )

        def process() -> VigilProcess:
            return VigilProcess(
                bootstrap=broker.bootstrap,
                topic=topic,
                db_url=db_url,
                workdir=here / "vigil",
                partitions=plan.partitions,
                settings={"KNOWLEDGE__PATHS": json.dumps([str(p) for p in KNOWLEDGE_PATHS]), "PROGRESS__SLA": QUIET_SLA}
                | dict(plan.settings),
            )

        suggestions = Suggestions(broker.bootstrap, f"{topic}.suggestions")
        feed = Feed(broker.bootstrap, topic, suggestions, itertools.cycle(question_set()), plan.rate)
        engine = create_engine(db_url, pool_size=2, data_dir=here)
        exit_codes: list[int] = []
        await suggestions.start()
        try:
            async with _running(process(), kind, "first start, the help centre imported", exit_codes) as vigil:
                await questions(vigil, feed, db_url, name="warm-up", seconds=5)
                before = await questions(vigil, feed, db_url, name="before", seconds=plan.baseline_s)

            now = datetime.now(UTC)
            background_from = now + timedelta(minutes=30)
            made = [
                materialise(s, background_from=background_from, window_start=now, window_s=0, settings=settings)
                for s in everything
                if not s.in_window
            ]
            load_s = await load(engine, [a for a, _ in made], [c for _, c in made if c is not None])
            _progress(f"{kind}: {len(made):,} timers armed in {load_s:.1f} s (vigil stopped)")

            async with _running(process(), kind, "with the timers", exit_codes) as vigil:
                await questions(vigil, feed, db_url, name="warm-up-2", seconds=3)
                window_start = datetime.now(UTC) + timedelta(seconds=5)
                window_end = window_start + timedelta(seconds=plan.window_s)
                in_window = [
                    materialise(
                        s,
                        background_from=background_from,
                        window_start=window_start,
                        window_s=plan.window_s,
                        settings=settings,
                    )
                    for s in everything
                    if s.in_window
                ]
                window_arms = [a for a, _ in in_window]
                window_load_s = await load(engine, window_arms, [c for _, c in in_window if c is not None], batch=500)
                expected = firings(window_arms, window_start, window_end)
                open_timers = await running_timers(engine)
                _progress(
                    f"{kind}: {len(in_window):,} more timers armed in {window_load_s:.1f} s, {open_timers:,} "
                    f"running; {len(expected):,} firings due in the next {plan.window_s:.0f} s"
                )
                histogram_before = lateness_histogram(await _metrics_text(vigil))
                profiler = None
                if profile is not None:
                    profiler = vigil.profile(profile / f"vigil-timers-{kind}.txt", rate=100)
                try:
                    seconds = (window_end - datetime.now(UTC)).total_seconds()
                    firing = await questions(vigil, feed, db_url, name="firing", seconds=seconds)
                finally:
                    if profiler is not None:
                        profiler.send_signal(signal.SIGINT)
                        await asyncio.to_thread(profiler.wait, 60)
                await asyncio.sleep(max(0.0, (window_end - datetime.now(UTC)).total_seconds()) + 3)
                histogram = lateness_histogram(await _metrics_text(vigil)) - histogram_before
                stored = await fired_at(engine, sorted({f.timer_id for f in expected}))
            late, missing = lateness(expected, stored)
            spoken = [f for f in expected if f.speaks]
            published = [
                suggestions.reminders[f.suggestion_id] - f.at.timestamp()
                for f in spoken
                if f.suggestion_id in suggestions.reminders
            ]
            timing: dict[str, Any] = {
                "expected": len(expected),
                "fired": len(late),
                "not_fired": missing,
                "stored": spread(late),
                "published_expected": len(spoken),
                "published": spread([max(0.0, v) for v in published]),
                "histogram_count": histogram.total,
                "histogram_p50": histogram.quantile(0.5),
                "histogram_within_1s": within(histogram, TARGET_LATENESS_P99_S),
                "running_timers": open_timers,
                "load_s": load_s,
            }
            _progress(
                f"{kind}: {len(late)}/{len(expected)} fired; lateness p50/p99/max "
                f"{timing['stored']['p50']:.3f}/{timing['stored']['p99']:.3f}/{timing['stored']['max']:.3f} s; "
                f"reminders published {len(published)}/{len(spoken)}, p50/p99 "
                f"{timing['published']['p50']:.3f}/{timing['published']['p99']:.3f} s"
            )

            await forget(engine)
            async with _running(process(), kind, "timers deleted", exit_codes) as vigil:
                await questions(vigil, feed, db_url, name="warm-up-3", seconds=3)
                after = await questions(vigil, feed, db_url, name="after", seconds=plan.baseline_s)
        finally:
            await suggestions.stop()
            await engine.dispose()
    return {
        "database": kind,
        "phases": [before, firing, after],
        "lateness": timing,
        "ratios": ratios(before, firing, after),
        "exit_codes": exit_codes,
    }


@contextlib.asynccontextmanager
async def _running(vigil: VigilProcess, kind: str, why: str, exit_codes: list[int]) -> AsyncIterator[VigilProcess]:
    """vigil started and ready; stopped (SIGTERM) afterwards, its exit code kept."""
    started = time.monotonic()
    try:
        await vigil.start(timeout_s=60)
        await _ready(vigil, 240)
        _progress(f"{kind}: vigil ready in {time.monotonic() - started:.1f} s ({why})")
        yield vigil
    finally:
        exit_codes.append(await vigil.stop())


def ratios(before: dict[str, Any], firing: dict[str, Any], after: dict[str, Any]) -> dict[str, float]:
    """Each latency median of the firing phase over the median of the two phases without timers."""
    out = {}
    for name in ("suggestion_p50_ms", "processing_p50_ms", "stored_p50_ms"):
        quiet = statistics.mean([before[name], after[name]])
        out[name] = firing[name] / quiet if quiet else math.nan
    return out


async def _until_handled(vigil: VigilProcess, count: float, timeout_s: float) -> Snapshot:
    async with asyncio.timeout(timeout_s):
        while True:
            snapshot = await vigil.snapshot()
            if snapshot.handled >= count:
                return snapshot
            await asyncio.sleep(0.1)


async def _ready(vigil: VigilProcess, timeout_s: float) -> None:
    async with asyncio.timeout(timeout_s):
        while True:
            await vigil.snapshot()  # raises if vigil died
            async with httpx.AsyncClient(timeout=5.0) as client:
                if (await client.get(f"http://127.0.0.1:{vigil.port}/readyz")).status_code == 200:
                    return
            await asyncio.sleep(0.1)


# --- report ------------------------------------------------------------------------------------------------------


def table(runs: list[dict[str, Any]]) -> str:
    """The markdown tables: lateness per database, and message latency per phase."""
    lines = [
        "| database | running timers | firings in the window | fired | lateness p50 / p99 / max (s) "
        "| reminder published p50 / p99 (s) | vigil's histogram: count, share ≤ 1 s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        t = run["lateness"]
        s, p = t["stored"], t["published"]
        lines.append(
            f"| {run['database']} | {t['running_timers']:,} | {t['expected']:,} | {t['fired']:,} "
            f"| {s['p50']:.3f} / {s['p99']:.3f} / {s['max']:.3f} | {p['p50']:.3f} / {p['p99']:.3f} "
            f"| {t['histogram_count']:,.0f}, {t['histogram_within_1s']:.1%} |"
        )
    lines += [
        "",
        "| database | phase | questions | answered | suggestion p50 / p99 (ms) | processing p50 / p99 (ms) "
        "| produce→stored p50 / p99 (ms) | vigil cores | machine cores |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        for ph in run["phases"]:
            lines.append(
                f"| {run['database']} | {ph['phase']} | {ph['sent']:,} | {ph['answered']:,} "
                f"| {ph['suggestion_p50_ms']:.1f} / {ph['suggestion_p99_ms']:.1f} "
                f"| {ph['processing_p50_ms']:.1f} / {ph['processing_p99_ms']:.1f} "
                f"| {ph['stored_p50_ms']:.1f} / {ph['stored_p99_ms']:.1f} "
                f"| {ph['vigil_cores']:.2f} | {ph['machine_cores']:.2f} |"
            )
        r = run["ratios"]
        lines.append(
            f"| {run['database']} | firing ÷ mean(before, after) | | | {r['suggestion_p50_ms']:.2f} "
            f"| {r['processing_p50_ms']:.2f} | {r['stored_p50_ms']:.2f} | | |"
        )
    return "\n".join(lines)


def verdicts(runs: list[dict[str, Any]]) -> list[str]:
    out = []
    for run in runs:
        p99 = run["lateness"]["stored"]["p99"]
        ratio = run["ratios"]["suggestion_p50_ms"]
        out.append(
            f"- {run['database']}: lateness p99 < {TARGET_LATENESS_P99_S:.0f} s "
            f"{'met' if p99 < TARGET_LATENESS_P99_S else 'MISSED'} ({p99:.3f} s); suggestion latency within "
            f"{TARGET_LATENCY_RATIO - 1:.0%} {'met' if ratio <= TARGET_LATENCY_RATIO else 'MISSED'} (x{ratio:.2f})"
        )
    return out


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.timers", description="vigil's timer-load benchmark.")
    parser.add_argument("--timers", type=int, help="running timers in all (default 100000)")
    parser.add_argument("--conversations", type=int, help="conversations they belong to (default 30000)")
    parser.add_argument("--in-window", type=int, help="timers that fire during the window (default 3000)")
    parser.add_argument("--window-s", type=float, help="seconds of the window (default 180)")
    parser.add_argument("--baseline-s", type=float, help="seconds of each phase without timers (default 60)")
    parser.add_argument("--rate", type=float, help="questions a second in every phase (default 20)")
    parser.add_argument("--db", default="sqlite", help="sqlite, postgresql, or both comma-separated")
    parser.add_argument("--quick", action="store_true", help="a short window and baselines, to check it runs")
    parser.add_argument("--json", type=Path, help="where to write the results (default bench/results/timers-*.json)")
    parser.add_argument("--profile", type=Path, help="directory for a py-spy profile of vigil during the window")
    parser.add_argument("--workdir", type=Path, help="keep the broker's and vigil's logs here (default: a temp dir)")
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE", help="a vigil setting")
    return parser


def _plan(args: argparse.Namespace) -> Plan:
    plan = QUICK if args.quick else Plan()
    changes: dict[str, Any] = {"databases": tuple(d.strip() for d in args.db.split(",") if d.strip())}
    for name in ("timers", "conversations", "in_window", "window_s", "baseline_s", "rate"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    if args.setting:
        changes["settings"] = tuple(tuple(item.split("=", 1)) for item in args.setting)
    return dataclasses.replace(plan, **changes)


async def _run(plan: Plan, workdir: Path, profile: Path | None) -> list[dict[str, Any]]:
    runs = []
    with EmbeddedBroker(log_path=workdir / "broker.log") as broker:
        for kind in plan.databases:
            runs.append(await one_database(plan, broker, kind, workdir, profile))
    return runs


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    plan = _plan(args)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="vigil-timers-")))
        workdir.mkdir(parents=True, exist_ok=True)
        runs = asyncio.run(_run(plan, workdir, args.profile))
    print(table(runs))
    print()
    print("\n".join(verdicts(runs)))
    output = report.save("timers", argv, dataclasses.asdict(plan), {"runs": runs}, args.json)
    print(f"\nresults: {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
