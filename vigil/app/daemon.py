"""The daemon: builds the parts from one ``Settings``, runs them, and shuts them down in order.

Start-up: HTTP first (so ``/healthz`` answers and ``/readyz`` says what is missing), then the database (migrated),
topics, the producer and the consumer, each retried with back-off until reachable. Shutdown, when the trigger
fires: stop intake, drain in-flight work within ``graceful_timeout_s``, commit offsets, close clients, stop HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import socket
from collections.abc import AsyncIterator, Sequence

import uvicorn
from prometheus_client import CollectorRegistry

from vigil.answers.drafting import Drafter
from vigil.answers.intervention import InterventionPolicy
from vigil.answers.skill import AnswerSkill
from vigil.app.health import Health
from vigil.app.http import EmbeddedServer, create_app
from vigil.app.settings import Settings
from vigil.cases.store import CaseStore
from vigil.core.clock import Clock, SystemClock
from vigil.core.errors import SettingsError, StartupError
from vigil.core.lifecycle import Phase
from vigil.core.metrics import Metrics
from vigil.core.retry import Backoff
from vigil.flow.gates import Gate
from vigil.flow.ingest import Ingest
from vigil.flow.pipeline import Pipeline
from vigil.flow.skills import Skill
from vigil.knowledge.store import open_knowledge_store
from vigil.live.fanout import Fanout
from vigil.live.feed import LiveFeed
from vigil.panel.oidc import OidcClient
from vigil.transport.select import Transports

log = logging.getLogger(__name__)

_INTAKE_STOP_S = 2.0
_HTTP_DRAIN_S = 3


class Daemon:
    """vigil's long-running process."""

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Clock | None = None,
        registry: CollectorRegistry | None = None,
        skills: Sequence[Skill] = (),
        gate: Gate | None = None,
    ) -> None:
        if not settings.kafka.bootstrap_servers and not settings.mqtt.host:
            raise SettingsError(
                "VIGIL_KAFKA__BOOTSTRAP_SERVERS", "not set, nor VIGIL_MQTT__HOST; vigil run needs a stream to read"
            )
        self.settings = settings
        self.clock = clock or SystemClock()
        self.metrics = Metrics(registry or CollectorRegistry())
        self.backoff = Backoff(self.clock, self.metrics, settings.ingest.retry_initial_s, settings.ingest.retry_max_s)
        self.store = CaseStore.from_settings(settings, clock=self.clock)
        self.knowledge = open_knowledge_store(settings, self.store, self.clock)
        self.drafter = Drafter(settings.llm, metrics=self.metrics, clock=self.clock)
        if settings.answers.enabled:
            skills = [*skills, AnswerSkill(self.knowledge, settings.answers, drafter=self.drafter)]
        self.feed = LiveFeed()
        self.fanout: Fanout | None = None
        if settings.panel.fanout and self.store.engine.dialect.name == "postgresql":
            self.fanout = Fanout(settings.database_url, self.feed, backoff=self.backoff)
            self.feed.relay = self.fanout.send
        self.transports = Transports.from_settings(settings, self.metrics)
        self.pipeline = Pipeline(
            store=self.store,
            skills=skills,
            gate=gate or InterventionPolicy(store=self.store, clock=self.clock, settings=settings.answers),
            sinks=self.transports.sinks,
            clock=self.clock,
            metrics=self.metrics,
            backoff=self.backoff,
            default_tenant=settings.default_tenant,
            feed=self.feed,
        )
        self.ingest = Ingest(
            sources=self.transports.sources,
            pipeline=self.pipeline,
            settings=settings.ingest,
            clock=self.clock,
            metrics=self.metrics,
            backoff=self.backoff,
            reachable=self._brokers_reachable,
        )
        self.phase = Phase.STARTING
        self.health = Health(
            {"database": self.store.ping, **self.transports.checks, "pipeline": self._check_running}
            | ({"knowledge": self.knowledge.check} if settings.answers.enabled else {}),
            clock=self.clock,
            metrics=self.metrics,
            interval_s=settings.health_interval_s,
        )
        self.oidc = OidcClient(settings.panel.oidc, clock=self.clock) if settings.panel.auth == "oidc" else None
        self.app = create_app(
            store=self.store,
            health=self.health,
            metrics=self.metrics,
            clock=self.clock,
            feed=self.feed,
            knowledge=self.knowledge,
            outboxes=self.transports.outboxes,
            panel=settings.panel,
            oidc=self.oidc,
        )
        self.http_port: int | None = None
        self._refresher: asyncio.Task[None] | None = None

    async def run(self, shutdown: asyncio.Event) -> None:
        """Run until ``shutdown`` is set, then shut down gracefully.

        Raises:
            StartupError: the HTTP port could not be bound, or a part failed for good.
        """
        server, serving = await self._serve_http()
        if self.fanout is not None:
            self.fanout.start()
        checking = asyncio.create_task(self.health.run_forever(), name="vigil-health")
        working = asyncio.create_task(self._work(), name="vigil-work")
        stopping = asyncio.create_task(shutdown.wait(), name="vigil-shutdown")
        try:
            await asyncio.wait({working, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if stopping.done():
                log.info("shutting down")
            await self._stop_work(working)
        finally:
            stopping.cancel()
            checking.cancel()
            await asyncio.gather(checking, return_exceptions=True)
            await self._close()
            server.should_exit = True
            await asyncio.gather(serving, return_exceptions=True)
        if working.done() and not working.cancelled() and working.exception() is not None:
            raise StartupError(f"vigil stopped: {working.exception()}") from working.exception()

    async def _serve_http(self) -> tuple[uvicorn.Server, asyncio.Task[None]]:
        http = self.settings.http
        config = uvicorn.Config(
            self.app, log_config=None, access_log=False, lifespan="off", timeout_graceful_shutdown=_HTTP_DRAIN_S
        )
        listener = _listen(http.host, http.port)
        server = EmbeddedServer(config)
        serving = asyncio.create_task(server.serve(sockets=[listener]), name="vigil-http")
        while not server.started:
            if serving.done():
                listener.close()
                raise StartupError(f"cannot serve HTTP on {http.host}:{http.port}: {serving.exception()!r}")
            await asyncio.sleep(0.01)
        self.http_port = int(listener.getsockname()[1])
        log.info("the panel is on http://%s:%d/panel (and api, healthz, readyz, metrics)", http.host, self.http_port)
        return server, serving

    def _brokers_reachable(self) -> bool:
        """Whether every broker answered its last health check (Kafka's is ``broker``, MQTT's ``mqtt``)."""
        problems = self.health.problems
        return all(problems.get(name) in (None, "not checked yet") for name in ("broker", "mqtt"))

    async def _check_running(self) -> None:
        if self.phase is not Phase.RUNNING:
            raise StartupError(self.phase)

    async def _work(self) -> None:
        if self.settings.database.migrate_on_start:
            self.phase = Phase.MIGRATING
            await self.backoff.retry("migrating the database", self.store.migrate)
        if self.settings.answers.enabled:
            self.phase = Phase.LOADING_KNOWLEDGE
            await self._load_knowledge()
        if self.oidc is not None:
            await self.oidc.start()
        self.phase = Phase.CONNECTING
        await self.transports.connect(self.backoff)
        log.info("consuming from %s", ", ".join(source.name for source in self.transports.sources))
        # What start-up built lives as long as the process: keep it out of the cyclic GC's full collections,
        # which otherwise scan it all and stall the loop (~100 ms on this heap, every few seconds under load).
        gc.collect()
        gc.freeze()
        self.phase = Phase.RUNNING
        try:
            await self.ingest.run()
        finally:
            self.phase = Phase.STOPPING

    async def _load_knowledge(self) -> None:
        await self.backoff.retry("opening the knowledge store", self.knowledge.open)
        paths = self.settings.knowledge.paths
        if paths:
            report = await self.backoff.retry("importing knowledge", lambda: self.knowledge.import_files(paths))
            log.info(
                "knowledge from %s: %d added, %d updated, %d unchanged",
                ", ".join(map(str, paths)),
                report.added,
                report.updated,
                report.unchanged,
            )
        self._refresher = asyncio.create_task(
            self.knowledge.refresh_forever(self.settings.knowledge.refresh_interval_s), name="vigil-knowledge-refresh"
        )

    async def _stop_work(self, working: asyncio.Task[None]) -> None:
        self.transports.stop_intake()
        await asyncio.wait({working}, timeout=_INTAKE_STOP_S)
        if not working.done():
            working.cancel()
            await asyncio.gather(working, return_exceptions=True)
        drained = await self.ingest.drain(self.settings.graceful_timeout_s)
        log.info("drained in-flight work" if drained else "drain timed out")

    async def _close(self) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
            await asyncio.gather(self._refresher, return_exceptions=True)
        self.feed.close()
        if self.fanout is not None:
            await self.fanout.close()
        await self.transports.close()
        closing = [self.drafter.aclose, self.store.close] + ([self.oidc.close] if self.oidc else [])
        for step in closing:
            try:
                await step()
            except Exception:
                log.exception("error while closing")


@contextlib.asynccontextmanager
async def running(daemon: Daemon) -> AsyncIterator[asyncio.Task[None]]:
    """Run a daemon in the background for the duration of a block (tests, the demo)."""
    shutdown = asyncio.Event()
    task = asyncio.create_task(daemon.run(shutdown))
    try:
        yield task
    finally:
        shutdown.set()
        await task


def _listen(host: str, port: int) -> socket.socket:
    """Bind the HTTP port ourselves: uvicorn would call sys.exit on a failure."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except OSError as exc:
        raise StartupError(f"cannot resolve the HTTP host {host!r}: {exc}") from exc
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(128)
    except OSError as exc:
        listener.close()
        raise StartupError(f"cannot listen on {host}:{port}: {exc}") from exc
    listener.setblocking(False)
    return listener
