"""The daemon: builds the parts from one ``Settings``, runs them, and shuts them down in order.

Start-up: HTTP first (so ``/healthz`` answers and ``/readyz`` says what is missing) and the event loop's lag monitor,
then each capability's start-up steps (the database migrated, the knowledge loaded, ...), topics, the producer and
the consumer, each retried with back-off until reachable, then the scheduled jobs. Shutdown, when the trigger
fires: stop intake (and the scheduler), drain in-flight work within ``graceful_timeout_s``, commit offsets, close
the transports, then each capability's clients (the case store last; the live feed's close ends the panels'
streams), stop HTTP.
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

from vigil.app.compose import Composition, compose
from vigil.app.health import Health
from vigil.app.http import EmbeddedServer, create_app
from vigil.app.settings import Settings
from vigil.core.clock import Clock
from vigil.core.errors import SettingsError, StartupError
from vigil.core.lifecycle import Phase
from vigil.core.loop_lag import LoopLagMonitor
from vigil.flow.capability import Step
from vigil.flow.ingest import Ingest
from vigil.flow.skills import Skill

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
    ) -> None:
        """Compose the capabilities (``vigil.app.compose``) and wire them to the transports, the pipeline and HTTP;
        ``skills`` are consulted before the capabilities' own."""
        if not settings.kafka.bootstrap_servers and not settings.mqtt.host:
            raise SettingsError(
                "VIGIL_KAFKA__BOOTSTRAP_SERVERS", "not set, nor VIGIL_MQTT__HOST; vigil run needs a stream to read"
            )
        self.settings = settings
        self.parts: Composition = compose(settings, clock=clock, registry=registry, skills=skills)
        self.clock = self.parts.platform.clock
        self.metrics = self.parts.platform.metrics
        self.backoff = self.parts.platform.backoff
        self.store = self.parts.store
        self.views = self.parts.views
        self.knowledge = self.parts.knowledge
        self.feed = self.parts.feed
        self.transports = self.parts.transports
        self.pipeline = self.parts.pipeline()
        self.scheduler = self.parts.scheduler()
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
        self.step: str | None = None
        """While ``phase`` is ``PREPARING``: the capability's start-up step under way (``/readyz`` names it)."""
        self.health = Health(
            {**self.parts.checks, **self.transports.checks, "pipeline": self._check_running},
            clock=self.clock,
            metrics=self.metrics,
            interval_s=settings.health_interval_s,
        )
        self.app = create_app(
            health=self.health, metrics=self.metrics, routers=self.parts.routers, panel=settings.panel
        )
        self.http_port: int | None = None
        self.loop_lag = LoopLagMonitor(self.metrics.loop_lag, self.metrics.loop_lag_max)
        """How late the event loop wakes (``vigil_event_loop_lag_seconds``), from start to shutdown."""

    async def run(self, shutdown: asyncio.Event) -> None:
        """Run until ``shutdown`` is set, then shut down gracefully.

        Raises:
            StartupError: the HTTP port could not be bound, or a part failed for good.
        """
        server, serving = await self._serve_http()
        checking = asyncio.create_task(self.health.run_forever(), name="vigil-health")
        watching = asyncio.create_task(self.loop_lag.run_forever(), name="vigil-loop-lag")
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
            watching.cancel()
            await asyncio.gather(checking, watching, return_exceptions=True)
            await self._close()  # the live feed closes with its capability, which ends the panels' streams
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
            raise StartupError(self.step if self.phase is Phase.PREPARING and self.step else self.phase)

    def _preparing(self, step: Step) -> None:
        self.phase, self.step = Phase.PREPARING, step.phase

    async def _work(self) -> None:
        await self.parts.start(on_step=self._preparing)
        self.phase = Phase.CONNECTING
        await self.transports.connect(self.backoff)
        log.info("consuming from %s", ", ".join(source.name for source in self.transports.sources))
        await self.backoff.retry("starting the scheduler", self.scheduler.start)
        # What start-up built lives as long as the process: keep it out of the cyclic GC's full collections,
        # which otherwise scan it all and stall the loop (~100 ms on this heap, every few seconds under load).
        gc.collect()
        gc.freeze()
        self.phase = Phase.RUNNING
        try:
            await self.ingest.run()
        finally:
            self.phase = Phase.STOPPING

    async def _stop_work(self, working: asyncio.Task[None]) -> None:
        self.transports.stop_intake()
        await asyncio.wait({working}, timeout=_INTAKE_STOP_S)
        if not working.done():
            working.cancel()
            await asyncio.gather(working, return_exceptions=True)
        await self.scheduler.stop()  # scheduled work is intake too; start-up, which starts it, is over by now
        drained = await self.ingest.drain(self.settings.graceful_timeout_s)
        log.info("drained in-flight work" if drained else "drain timed out")

    async def _close(self) -> None:
        await self.scheduler.stop()  # again, for a run cancelled before it could stop work
        await self.transports.close()
        await self.parts.close()


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
