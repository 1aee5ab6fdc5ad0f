"""`vigil eval replay`: the real pipeline, in process, on a file of v1 events, on the events' own time.

No broker and no HTTP port: each line is parsed as ingest parses it (``wire.events.parse``, under the ingest limits)
and handed to the pipeline, one event at a time, in file order. The clock is a ``ManualClock`` moved to each
event's time (``occurred_at``: ``sent_at`` or ``at``) before the event is handled. Simulated time never goes back:
an event older than one before it is handled at the later time, as if it had arrived late (the gate may find it
``stale``). Handling takes no simulated time, so ``latency_ms`` is 0 and no message is superseded by the next one:
a replay shows what an instantaneous vigil would say. Retries wait on the machine's clock (a simulated one would
never move while they wait).

Storage and settings are the daemon's: the configured database and data dir, migrated at start (as
``VIGIL_DATABASE__MIGRATE_ON_START`` says), and, when answers are enabled, the knowledge store with
``VIGIL_KNOWLEDGE__PATHS`` imported. ``fresh`` empties both first (``empty``). The same input and settings, from the
same starting state, give the same output byte for byte (with LLM drafting off: a model's drafts are its own).
"""

from __future__ import annotations

import itertools
import logging
import shutil
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import BinaryIO

import sqlalchemy as sa
from prometheus_client import Counter as MetricCounter

from vigil.app.compose import CAPABILITIES, Composition, compose
from vigil.app.settings import Settings
from vigil.app.tables import metadata
from vigil.cases.store import CaseStore
from vigil.core.clock import ManualClock, SystemClock
from vigil.core.errors import EventConflict, Rejected, StartupError, StoreError
from vigil.core.retry import Backoff
from vigil.db.engine import describe
from vigil.dev.replay import BadLine, read_lines
from vigil.flow.pipeline import Pipeline
from vigil.flow.scheduler import Scheduler
from vigil.flow.settings import IngestSettings
from vigil.knowledge.embedding import Embedder
from vigil.knowledge.store import chroma_folder
from vigil.transport.base import Sink
from vigil.transport.select import Transports
from vigil.wire.events import Event, Suggestion, parse

log = logging.getLogger(__name__)


class JsonLinesSink:
    """Writes each suggestion it is given as one v1 JSON line."""

    name = "file"

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle

    async def start(self) -> None:
        """Nothing to connect."""

    async def publish(self, suggestion: Suggestion) -> None:
        self._handle.write(suggestion.to_json() + b"\n")

    async def close(self) -> None:
        """The caller owns the file."""


REPLAYED = tuple(name for name, _ in CAPABILITIES if name not in ("live", "panel"))
"""The capabilities a replay sets up: all but those that serve people watching (no HTTP port, no live feed)."""


_UNHURRIED_S = 600.0
"""The bound on a database or knowledge read in a replay: none that a busy machine could reach. A read cut off by
wall time would change what is said, and the output would depend on the machine's load."""


def composed(settings: Settings, clock: ManualClock, sink: Sink, *, embedder: Embedder | None = None) -> Composition:
    """The daemon's composition on simulated time, with ``sink`` as the only sink and no source. Retries wait on
    the machine's clock: a simulated one would never move while they wait."""
    unhurried = settings.database.model_copy(update={"timeout_s": max(settings.database.timeout_s, _UNHURRIED_S)})
    return compose(
        settings.model_copy(update={"database": unhurried}),
        clock=clock,
        retry_clock=SystemClock(),
        transports=Transports(sources=[], sinks=[sink]),
        only=REPLAYED,
        embedder=embedder,
    )


@dataclass
class Summary:
    """What a replay did: the events it handled, what vigil said and kept quiet about, in what time."""

    events: Counter[str] = field(default_factory=Counter)
    duplicates: int = 0
    bad: list[BadLine] = field(default_factory=list)
    suggestions: dict[str, int] = field(default_factory=dict)
    silences: dict[str, int] = field(default_factory=dict)
    first: datetime | None = None
    last: datetime | None = None
    starting_s: float = 0.0
    replaying_s: float = 0.0

    def lines(self, out: Path) -> list[str]:
        """The summary as ``vigil eval replay`` prints it on stderr."""
        said = sum(self.suggestions.values())
        span = "no events" if self.first is None or self.last is None else _span(self.first, self.last)
        return [
            f"events: {sum(self.events.values())} ({_listed(self.events) or 'none'}), "
            f"{self.duplicates} already stored, {len(self.bad)} bad lines",
            f"suggestions: {said} ({_listed(self.suggestions) or 'none'}) in {out}",
            f"silences: {sum(self.silences.values())} ({_listed(self.silences) or 'none'})",
            f"simulated: {span}",
            f"wall: {self.replaying_s:.2f} s replaying, {self.starting_s:.2f} s starting (database, model, knowledge)",
        ]


def _listed(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in sorted(counts.items()))


def _span(first: datetime, last: datetime) -> str:
    def stamp(moment: datetime) -> str:
        return moment.isoformat().replace("+00:00", "Z")

    return f"{stamp(first)} to {stamp(last)} ({last - first})"


async def replay(
    path: Path, out: Path, settings: Settings, *, fresh: bool = False, embedder: Embedder | None = None
) -> Summary:
    """Replay the v1 events of ``path`` through the pipeline, writing every suggestion published to ``out``.

    A line that is not a v1 event, or that the store refuses, is skipped and named in ``Summary.bad``.

    Raises:
        StoreError: the database could not be emptied, migrated or closed.
        StartupError: ``out`` cannot be written, or the knowledge store or its model could not be opened.
    """
    wall = SystemClock()
    began = wall.monotonic()
    summary = Summary()
    events = _events(path, settings.ingest, summary.bad)
    first = next(events, None)
    with _written(out) as handle:
        if fresh:
            await empty(settings)
        if first is not None:
            clock = ManualClock(first[1].occurred_at)
            summary.first = clock.now()
            parts = composed(settings, clock, JsonLinesSink(handle), embedder=embedder)
            platform = parts.platform
            scheduler = parts.scheduler()
            try:
                await parts.start()
                summary.starting_s = wall.monotonic() - began
                await platform.backoff.retry("starting the scheduler", scheduler.start)
                replayer = Replayer(parts.pipeline(), scheduler, clock, platform.backoff)
                await replayer.run(itertools.chain([first], events), summary)
            finally:
                await scheduler.stop()
                await parts.close()
            summary.last = clock.now()
            summary.suggestions = _counts(platform.metrics.suggestions_published)
            summary.silences = _counts(platform.metrics.suggestions_suppressed)
            summary.duplicates = sum(_counts(platform.metrics.events_duplicate).values())
    summary.bad.sort(key=lambda bad: bad.number)
    summary.replaying_s = wall.monotonic() - began - summary.starting_s
    return summary


def _written(out: Path) -> BinaryIO:
    try:
        return out.open("wb")
    except OSError as exc:
        raise StartupError(f"cannot write {out}: {exc.strerror}") from exc


class Replayer:
    """Hands events to the pipeline one at a time, moving simulated time to each event's own first."""

    def __init__(self, pipeline: Pipeline, scheduler: Scheduler, clock: ManualClock, backoff: Backoff) -> None:
        self._pipeline = pipeline
        self._scheduler = scheduler
        self._clock = clock
        self._backoff = backoff

    async def run(self, events: Iterable[tuple[int, Event]], summary: Summary) -> None:
        """Handle ``events`` (line number, event) in order, counting them in ``summary``."""
        for number, event in events:
            await self.run_until(event.occurred_at)
            summary.events[event.type] += 1
            bad = await self._handle(number, event)
            if bad is not None:
                summary.bad.append(bad)

    async def run_until(self, moment: datetime) -> None:
        """Move simulated time up to ``moment`` (never back). The one place time passes between events: scheduled
        jobs due on the way run here, each at its own time, before the clock reaches ``moment``."""
        if moment > self._clock.now():
            await self._scheduler.run_due(moment)
        self._clock.advance_to(moment)

    async def _handle(self, number: int, event: Event) -> BadLine | None:
        """Handle one event as ingest does; what ingest would dead-letter is returned as a bad line instead."""
        try:
            await self._backoff.retry(
                "handling an event", partial(self._pipeline.handle, event, self._clock.monotonic())
            )
        except (EventConflict, StoreError) as exc:
            rejection = exc if isinstance(exc, Rejected) else Rejected("store_rejected", str(exc))
            return BadLine(number, rejection.reason, rejection.detail)
        except Exception:
            # A bug, not bad input: shown with its traceback, and the replay goes on as the daemon would.
            log.exception("failed on %s %s", event.type, event.id, extra={"conversation_id": event.conversation_id})
            return BadLine(number, "processing_failed", "vigil failed on this event; see the log")
        return None


def _events(path: Path, limits: IngestSettings, bad: list[BadLine]) -> Iterator[tuple[int, Event]]:
    """The v1 events of ``path`` with their line numbers; a line that is not one is added to ``bad``."""
    for line in read_lines(path):
        try:
            event = parse(line.value, max_event_bytes=limits.max_event_bytes, max_text_bytes=limits.max_text_bytes)
        except Rejected as rejected:
            bad.append(BadLine(line.number, rejected.reason, rejected.detail))
            continue
        yield line.number, event


def _counts(counter: MetricCounter) -> dict[str, int]:
    """A counter with one label, as {label value: count}."""
    counts: dict[str, int] = {}
    for family in counter.collect():
        for sample in family.samples:
            if sample.name.endswith("_total") and sample.value:
                counts[next(iter(sample.labels.values()))] = int(sample.value)
    return counts


async def empty(settings: Settings) -> None:
    """Start from nothing: drop vigil's own tables from the configured database and create them again (on
    PostgreSQL nothing else in the database is touched), and delete the embedded Chroma folder of the data dir.
    A Chroma server (``VIGIL_KNOWLEDGE__CHROMA_URL``) keeps its collections: opening the knowledge store then
    removes every vector that no entry holds.

    Raises:
        StoreError: the database could not be reached or refused.
        StartupError: the Chroma folder could not be deleted.
    """
    store = CaseStore.from_settings(
        settings.database,
        data_dir=settings.data_dir,
        clock=SystemClock(),
        default_tenant=settings.default_tenant,
        future_skew_s=settings.ingest.future_skew_s,
    )
    try:
        try:
            async with store.engine.begin() as conn:
                await conn.run_sync(_drop_tables)
        except Exception as exc:
            raise StoreError(f"cannot empty the database: {describe(exc)}") from exc
        await store.migrate()
    finally:
        await store.close()
    chroma = chroma_folder(settings.data_dir)
    try:
        if chroma.exists():
            shutil.rmtree(chroma)
    except OSError as exc:
        raise StartupError(f"cannot delete {chroma}: {exc.strerror}") from exc


def _drop_tables(connection: sa.Connection) -> None:
    metadata.drop_all(connection, checkfirst=True)
    connection.execute(sa.text("DROP TABLE IF EXISTS alembic_version"))
