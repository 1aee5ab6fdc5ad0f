"""A harness for tests (and for trying a skill): vigil's real pipeline on the in-process transport.

``wired`` composes the capabilities as the daemon does, on SQLite in a directory of your choosing, with a
``ManualClock`` unless told otherwise, and feeds what you ``send`` through ``Ingest``, so ordering per conversation,
the gates and dead-lettering are the real ones::

    async with wired(tmp_path, skills=[MySkill()]) as vigil:
        await vigil.send(message)
        assert vigil.published[0].kind == "answer"

``panel_app`` is the HTTP app with the panel's routers, served without the daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from vigil import panel as panel_capability
from vigil.app.compose import Composition, compose
from vigil.app.health import Health
from vigil.app.http import create_app
from vigil.app.settings import Settings
from vigil.cases.store import CaseStore
from vigil.cases.views import CaseViews
from vigil.core.clock import Clock, ManualClock, SystemClock
from vigil.core.errors import Rejected
from vigil.core.metrics import Metrics
from vigil.flow.feed import LiveFeed
from vigil.flow.ingest import Ingest
from vigil.flow.scheduler import Scheduler
from vigil.flow.skills import Skill
from vigil.knowledge.embedding import Embedder
from vigil.knowledge.store import KnowledgeStore
from vigil.panel.goodwill import GoodwillBudgets
from vigil.panel.oidc import OidcClient
from vigil.panel.settings import PanelSettings
from vigil.transport.base import Outbox, Record
from vigil.transport.memory import MemorySink, MemorySource
from vigil.transport.select import Transports
from vigil.wire.events import Event, Feedback, Suggestion
from vigil.wire.proof import Proofs


@dataclass
class Wired:
    """A running pipeline: send it events, then look at what it published, stored and counted."""

    parts: Composition
    source: MemorySource
    sink: MemorySink
    ingest: Ingest
    scheduler: Scheduler
    _sent: int = 0

    @property
    def store(self) -> CaseStore:
        return self.parts.store

    @property
    def views(self) -> CaseViews:
        return self.parts.views

    @property
    def metrics(self) -> Metrics:
        return self.parts.platform.metrics

    @property
    def clock(self) -> Clock:
        return self.parts.platform.clock

    @property
    def feed(self) -> LiveFeed:
        return self.parts.feed

    @property
    def published(self) -> list[Suggestion]:
        """Every suggestion published so far, in order."""
        return self.sink.published

    @property
    def dead_letters(self) -> list[tuple[Record, Rejected]]:
        """Every record dead-lettered so far, with the reason."""
        return self.source.dead_letters

    async def send(self, *events: Event | bytes | Record) -> None:
        """Put ``events`` on the stream (an event is sent as its JSON; bytes as they are, to send a bad record) and
        return once every record sent so far is handled: stored and published, or dead-lettered."""
        self.source.put(_record(event, self._sent + n) for n, event in enumerate(events))
        self._sent += len(events)
        await self.source.acknowledged(self._sent)

    async def advance(self, until: datetime) -> None:
        """Move the ``ManualClock`` to ``until``, running every scheduled job due on the way at its own time."""
        await self.scheduler.run_due(until)

    def signed(self, event: Feedback, action_id: str) -> Feedback:
        """``event`` (a decision on the action ``action_id``) signed with the daemon's key, as the panel signs one."""
        return self.parts.proofs.signed(event, action_id=action_id, now=self.clock.now())

    def sample(self, name: str, **labels: str) -> float:
        """A metric sample's value (0 if it was never set), e.g. ``sample("vigil_events_consumed_total", type=...)``."""
        return self.metrics.registry.get_sample_value(name, labels) or 0.0


def _record(event: Event | bytes | Record, offset: int) -> Record:
    if isinstance(event, Record):
        return event
    value = event if isinstance(event, bytes) else event.model_dump_json().encode()
    return Record(value=value, origin={"offset": str(offset)})


@contextlib.asynccontextmanager
async def wired(
    directory: Path,
    *,
    settings: Settings | None = None,
    skills: Sequence[Skill] = (),
    clock: Clock | None = None,
    capabilities: Collection[str] | None = None,
    registry: CollectorRegistry | None = None,
    embedder: Embedder | None = None,
) -> AsyncIterator[Wired]:
    """vigil's pipeline, composed and started; drained and closed on exit.

    Args:
        directory: the data directory (SQLite lives there unless ``settings`` names another database).
        settings: by default vigil's defaults with answers off; ``data_dir`` is always ``directory``.
        skills: consulted before the capabilities' own.
        clock: by default a ``ManualClock`` at the current time (advance it yourself; back-off waits on it).
        capabilities: the names (``vigil.app.compose.CAPABILITIES``) to set up; by default all.
        embedder: the knowledge's embedding model, when answers are on (one already loaded saves seconds).
    """
    settings = settings or Settings(_env_file=None, answers={"enabled": False})
    settings = settings.model_copy(update={"data_dir": directory})
    source, sink = MemorySource(finite=False), MemorySink()
    parts = compose(
        settings,
        clock=clock or ManualClock(datetime.now(UTC)),
        registry=registry,
        skills=skills,
        transports=Transports(sources=[source], sinks=[sink]),
        only=capabilities,
        embedder=embedder,
    )
    platform = parts.platform
    ingest = Ingest(
        sources=[source],
        pipeline=parts.pipeline(),
        settings=settings.ingest,
        clock=platform.clock,
        metrics=platform.metrics,
        backoff=platform.backoff,
    )
    scheduler = parts.scheduler()
    try:
        await parts.start()
        await platform.backoff.retry("starting the scheduler", scheduler.start)
        running = asyncio.create_task(ingest.run(), name="vigil-testing-ingest")
        try:
            yield Wired(parts, source, sink, ingest, scheduler)
        finally:
            source.stop_intake()
            await running
            await ingest.drain(settings.graceful_timeout_s)
    finally:
        await scheduler.stop()
        await parts.close()


def panel_app(
    *,
    views: CaseViews,
    metrics: Metrics,
    health: Health | None = None,
    clock: Clock | None = None,
    feed: LiveFeed | None = None,
    knowledge: KnowledgeStore | None = None,
    outboxes: Sequence[Outbox] = (),
    panel: PanelSettings | None = None,
    oidc: OidcClient | None = None,
    budgets: GoodwillBudgets | None = None,
    proofs: Proofs | None = None,
) -> FastAPI:
    """The HTTP app with the panel's routers (``vigil.panel.routers``) over ``views``, without a daemon."""
    panel = panel or PanelSettings()
    clock = clock or SystemClock()
    routers = panel_capability.routers(
        panel,
        clock=clock,
        views=views,
        knowledge=knowledge,
        feed=feed or LiveFeed(),
        outboxes=outboxes,
        proofs=proofs or Proofs([b"vigil-testing: a key that signs decisions"]),
        oidc=oidc,
        budgets=budgets,
    )
    health = health or Health({}, clock=clock, metrics=metrics, interval_s=1)
    return create_app(health=health, metrics=metrics, routers=routers, panel=panel)
