"""The composition root: the platform, the stores, and one line per capability, gathered for the daemon.

Each capability's ``setup`` gets its own settings section, the ``Platform`` and the stores it uses; what they give
back is collected here: skills, gates chained per suggestion kind, readiness checks, pipeline watchers, HTTP routers,
start-up steps (in capability order) and closing steps (in reverse, so the case store closes last).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from vigil import actions, answers, cases, knowledge, live, mining, panel, progress
from vigil.actions.standings import BudgetStandings
from vigil.app.settings import Settings
from vigil.cases.store import CaseStore
from vigil.cases.views import CaseViews
from vigil.core.clock import Clock, SystemClock
from vigil.core.metrics import Metrics
from vigil.core.retry import Backoff
from vigil.dev.demo import bundled_knowledge
from vigil.flow.capability import Capability, Check, Platform, Step
from vigil.flow.feed import LiveFeed
from vigil.flow.gates import ConfidenceGate, Gate, Gates
from vigil.flow.outlet import Outlet
from vigil.flow.pipeline import Pipeline, Watcher
from vigil.flow.scheduler import Job, Scheduler, replica_id
from vigil.flow.skills import Skill
from vigil.flow.tenure import SqlTenures
from vigil.knowledge.embedding import Embedder
from vigil.knowledge.store import KnowledgeStore, open_knowledge_store
from vigil.transport.select import Transports
from vigil.wire.proof import Proofs

if TYPE_CHECKING:
    from vigil.panel.goodwill import GoodwillBudgets

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Parts:
    """What the capabilities are set up from."""

    settings: Settings
    platform: Platform
    store: CaseStore
    views: CaseViews
    knowledge: KnowledgeStore
    feed: LiveFeed
    transports: Transports
    outlet: Outlet
    """Where scheduled jobs speak: bound to the pipeline once ``Composition.pipeline`` builds it."""
    proofs: Proofs
    """Signs decisions on actions (the panel) and verifies them (the actions capability): ``vigil.wire.proof``."""
    follows_models: bool = True
    """The knowledge serves the model the settings choose (not one handed in): a tuned one once it is accepted."""


def _fanout_url(parts: Parts) -> str | None:
    """Replicas share live updates through PostgreSQL's LISTEN/NOTIFY, when asked to and the database is one."""
    wanted = parts.settings.panel.fanout and parts.store.engine.dialect.name == "postgresql"
    return parts.settings.database_url if wanted else None


def _budgets(parts: Parts) -> GoodwillBudgets | None:
    """The seam between two capabilities that may not import each other: the lead's overview (panel) shows goodwill
    spend against the concession budget (actions). The panel declares what it reads (``vigil.panel.goodwill``); the
    actions capability's reader answers it; none when actions are off."""
    if not parts.settings.actions.enabled:
        return None
    return BudgetStandings(
        parts.settings.actions.budget,
        parts.store.engine,
        clock=parts.platform.clock,
        timeout_s=parts.settings.database.timeout_s,
    )


CAPABILITIES: tuple[tuple[str, Callable[[Parts], Capability]], ...] = (
    ("cases", lambda p: cases.setup(p.settings.database, p.platform, store=p.store)),
    ("knowledge", lambda p: knowledge.setup(
        p.settings.knowledge, p.platform, knowledge=p.knowledge, load=p.settings.answers.enabled,
        data_dir=p.settings.data_dir if p.follows_models else None,
    )),
    ("answers", lambda p: answers.setup(
        p.settings.answers, p.settings.llm, p.platform, store=p.store, knowledge=p.knowledge
    )),
    ("mining", lambda p: mining.setup(
        p.settings.miner, p.settings.llm, p.platform, engine=p.store.engine, knowledge=p.knowledge,
        load=p.settings.answers.enabled,
    )),
    ("progress", lambda p: progress.setup(
        p.settings.progress, p.platform, engine=p.store.engine, outlet=p.outlet,
        timeout_s=p.settings.database.timeout_s,
    )),
    ("actions", lambda p: actions.setup(
        p.settings.actions, p.platform, engine=p.store.engine, bundled=bundled_knowledge() / "rulebooks",
        outlet=p.outlet, timeout_s=p.settings.database.timeout_s, proofs=p.proofs,
    )),
    ("live", lambda p: live.setup(p.platform, feed=p.feed, fanout_url=_fanout_url(p))),
    ("panel", lambda p: panel.setup(
        p.settings.panel, p.platform, views=p.views, knowledge=p.knowledge, feed=p.feed,
        outboxes=p.transports.outboxes, budgets=_budgets(p), proofs=p.proofs,
    )),
)  # fmt: skip
"""Every capability, by name, in start-up order."""


@dataclass(frozen=True, slots=True)
class Composition(Parts):
    """The platform, the stores and what every capability gave, ready for the daemon (or a replay, or a test) to
    run: ``start`` and ``close`` around the pipeline and the scheduler."""

    skills: list[Skill] = field(default_factory=list)
    gates: Gates = field(default_factory=lambda: Gates({}, base=ConfidenceGate(0.0)))
    checks: dict[str, Check] = field(default_factory=dict)
    watchers: list[Watcher] = field(default_factory=list)
    routers: list[Any] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)
    starting: list[Step] = field(default_factory=list)
    closing: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def start(self, on_step: Callable[[Step], None] = lambda step: None) -> None:
        """Run every capability's start-up steps in order, each retried with back-off until it succeeds;
        ``on_step`` is told of each before it runs (the daemon's ``/readyz`` names it)."""
        for step in self.starting:
            on_step(step)
            await self.platform.backoff.retry(step.phase, step.run)

    async def close(self) -> None:
        """Run every capability's closing steps (in reverse capability order: the case store last); an error is
        logged and the next step still runs."""
        for step in self.closing:
            try:
                await step()
            except Exception:
                log.exception("error while closing")

    def scheduler(self) -> Scheduler:
        """One scheduler, on the platform's clock, for every capability's jobs; durable ones claim their windows
        in the case store's database."""
        return Scheduler(
            self.jobs, clock=self.platform.clock, registry=self.platform.registry, engine=self.store.engine
        )

    def pipeline(self) -> Pipeline:
        """The pipeline over the case store, the skills, the gates, the sinks and the watchers; the outlet speaks
        through it from now on."""
        pipeline = Pipeline(
            recorder=self.store,
            skills=self.skills,
            gates=self.gates,
            sinks=self.transports.sinks,
            clock=self.platform.clock,
            metrics=self.platform.metrics,
            backoff=self.platform.backoff,
            default_tenant=self.settings.default_tenant,
            watchers=self.watchers,
        )
        self.outlet.bind(pipeline)
        return pipeline


def platform(
    settings: Settings,
    *,
    clock: Clock | None = None,
    registry: CollectorRegistry | None = None,
    retry_clock: Clock | None = None,
) -> Platform:
    """The clock, the metrics on ``registry`` (a fresh one by default) and the shared retry policy, which waits on
    ``retry_clock`` (by default the clock)."""
    clock = clock or SystemClock()
    metrics = Metrics(registry or CollectorRegistry())
    backoff = Backoff(retry_clock or clock, metrics, settings.ingest.retry_initial_s, settings.ingest.retry_max_s)
    return Platform(clock=clock, registry=metrics.registry, metrics=metrics, backoff=backoff)


def compose(
    settings: Settings,
    *,
    clock: Clock | None = None,
    registry: CollectorRegistry | None = None,
    skills: Sequence[Skill] = (),
    transports: Transports | None = None,
    only: Collection[str] | None = None,
    retry_clock: Clock | None = None,
    embedder: Embedder | None = None,
) -> Composition:
    """Build the platform and the stores and set up every capability (or those named in ``only``); nothing is
    contacted yet.

    Args:
        skills: skills beyond the capabilities' own, consulted first (tests, experiments).
        transports: the sources and sinks; by default those the settings ask for.
        only: the names (``CAPABILITIES``) of the capabilities to set up; by default all.
        retry_clock: what back-off waits on, if not the clock (a replay on simulated time).
        embedder: the knowledge's embedding model, if not the one the settings name (one already loaded).
    """
    base = platform(settings, clock=clock, registry=registry, retry_clock=retry_clock)
    store = CaseStore.from_settings(
        settings.database,
        data_dir=settings.data_dir,
        clock=base.clock,
        default_tenant=settings.default_tenant,
        future_skew_s=settings.ingest.future_skew_s,
    )
    if settings.approvals.secret is None and store.engine.dialect.name == "postgresql":
        log.warning(
            "VIGIL_APPROVALS__SECRET is not set: decisions on actions are signed with a key made in %s, which other "
            "replicas do not hold (a decision signed by one would be refused by another); set one for all of them",
            settings.data_dir,
        )
    parts = Parts(
        settings=settings,
        platform=base,
        store=store,
        views=CaseViews(store.engine, timeout_s=settings.database.timeout_s),
        knowledge=open_knowledge_store(
            settings.knowledge,
            store.engine,
            data_dir=settings.data_dir,
            clock=base.clock,
            timeout_s=settings.database.timeout_s,
            embedder=embedder,
        ),
        feed=LiveFeed(),
        outlet=Outlet(),
        proofs=Proofs.from_settings(settings.approvals, data_dir=settings.data_dir),
        follows_models=embedder is None,
        transports=transports
        or Transports.from_settings(
            settings.kafka,
            settings.mqtt,
            metrics=base.metrics,
            handover_timeout_s=settings.graceful_timeout_s,
            max_in_flight=settings.ingest.max_in_flight,
            tenures=_tenures(store, base.clock, settings.database.timeout_s),
        ),
    )
    chosen = [setup(parts) for name, setup in CAPABILITIES if only is None or name in only]
    store.keep_with([keeper for c in chosen for keeper in c.keepers])
    chains: dict[str, list[Gate]] = {}
    for capability in chosen:
        for kind, gates in capability.gates.items():
            chains.setdefault(kind, []).extend(gates)
    return Composition(
        settings=settings,
        platform=base,
        store=store,
        views=parts.views,
        knowledge=parts.knowledge,
        feed=parts.feed,
        transports=parts.transports,
        outlet=parts.outlet,
        proofs=parts.proofs,
        skills=[*skills, *(skill for c in chosen for skill in c.skills)],
        # The confidence floor for kinds no capability gates is the answers' (the one setting vigil has for it).
        gates=Gates(chains, base=ConfidenceGate(settings.answers.min_confidence)),
        checks={name: check for c in chosen for name, check in c.checks.items()},
        watchers=[watcher for c in chosen for watcher in c.watchers],
        routers=[router for c in chosen for router in c.routers],
        jobs=[job for c in chosen for job in c.jobs],
        starting=[step for c in chosen for step in c.starting],
        closing=[step for c in reversed(chosen) for step in c.closing],
    )


def _tenures(store: CaseStore, clock: Clock, timeout_s: float) -> SqlTenures | None:
    """Where Kafka counts its partitions' tenures, to fence a replica the group moved on from: on PostgreSQL, which
    replicas share. On SQLite there is one process, so no other consumer is given its partitions while it runs, and
    a proof in every write batch would cost its ingest about a tenth of its CPU an event for nothing (measured:
    0.76 against 0.70 ms, `python -m bench.quick --only ingest`)."""
    if store.engine.dialect.name != "postgresql":
        return None
    return SqlTenures(store.engine, holder=replica_id(), clock=clock, timeout_s=timeout_s)
