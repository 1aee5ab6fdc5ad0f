"""Lifecycle benchmark: how long vigil takes to start, to stop, to notice a dependency go, and to give up waiting.

The tests check what happens at each of these moments (vigil drains, exits 0, goes unready, falls back) and only
bound their waits with deadlines; how long each takes is measured here, as the numbers an operator plans with:

- **start**: ``vigil run`` (SQLite, answers off as in the e2e tests) from exec to ``/healthz`` and to ``/readyz`` 200;
- **stop**: SIGTERM, then SIGINT, while a backlog is being consumed and three panels watch ``/api/live``: signal to
  exit, against ``graceful_timeout_s``;
- **second signal**: PostgreSQL with the ``message`` table locked, so the drain cannot end; SIGINT, then, once
  the drain is logged, SIGTERM: second signal to exit;
- **frozen broker**: the broker stopped with SIGSTOP: freeze to ``/readyz`` 503, and thaw to 200 again;
- **unreachable database**: vigil retrying its start-up against a port where nothing listens: SIGTERM to exit;
- **demo**: ``vigil demo --no-traffic`` (its own broker): SIGINT to exit;
- **drafting budget**: a draft against a server that never answers, against ``VIGIL_LLM__TIMEOUT_S``;
- **OIDC timeout**: a sign-in against a provider that never answers, against ``VIGIL_PANEL__OIDC__TIMEOUT_S``.

Run: ``python -m bench.lifecycle`` (3 repeats, about 4 minutes) or ``--quick`` (one repeat).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from bench import databases, report, traffic
from bench.daemon import VigilProcess
from vigil.answers.drafting import Drafter, DraftSource
from vigil.core.clock import SystemClock
from vigil.core.errors import AuthUnavailable
from vigil.dev.broker import EmbeddedBroker, free_port
from vigil.llm.metrics import LlmMetrics
from vigil.llm.settings import LlmSettings
from vigil.panel.oidc import OidcClient
from vigil.panel.settings import OidcSettings
from vigil.transport.kafka import ensure_topics
from vigil.transport.settings import KafkaSettings

GRACEFUL_TIMEOUT_S = 10.0  # vigil's default
BUDGET_S = 3.0  # the default VIGIL_LLM__TIMEOUT_S
OIDC_TIMEOUT_S = 5.0  # the default VIGIL_PANEL__OIDC__TIMEOUT_S
_DAY = datetime(2026, 11, 2, tzinfo=UTC)
_BASE = {"ANSWERS__ENABLED": "false", "HEALTH_INTERVAL_S": "0.2", "GRACEFUL_TIMEOUT_S": str(GRACEFUL_TIMEOUT_S)}

Seconds = dict[str, float]


async def until(what: str, predicate: Callable[[], Awaitable[bool]], timeout_s: float) -> float:
    """Poll ``predicate`` every 10 ms; the seconds it took to hold (raises after ``timeout_s``)."""
    started = time.monotonic()
    while not await predicate():
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"{what}: not within {timeout_s}s")
        await asyncio.sleep(0.01)
    return time.monotonic() - started


def status_is(port: int, path: str, code: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        try:
            async with httpx.AsyncClient(timeout=2.0) as client:
                return (await client.get(f"http://127.0.0.1:{port}{path}")).status_code == code
        except httpx.HTTPError:
            return False

    return check


async def sample(vigil: VigilProcess, name: str) -> float:
    """The sum of every sample called ``name`` on vigil's /metrics."""
    async with httpx.AsyncClient(timeout=5.0) as client:
        text = (await client.get(f"http://127.0.0.1:{vigil.port}/metrics")).text
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name)


async def timed_stop(vigil: VigilProcess, sig: signal.Signals, timeout_s: float = 60.0) -> tuple[float, int]:
    started = time.monotonic()
    code = await vigil.stop(timeout_s, sig)
    return time.monotonic() - started, code


@contextlib.asynccontextmanager
async def watchers(port: int, count: int) -> AsyncIterator[None]:
    """``count`` panels on ``/api/live`` for the duration of the block (their streams end with vigil)."""

    async def watch() -> None:
        with contextlib.suppress(httpx.HTTPError):
            async with (
                httpx.AsyncClient(timeout=None) as client,
                client.stream("GET", f"http://127.0.0.1:{port}/api/live") as stream,
            ):
                async for _ in stream.aiter_bytes():
                    pass

    tasks = [asyncio.create_task(watch()) for _ in range(count)]
    try:
        yield
    finally:
        await asyncio.wait(tasks, timeout=5)
        for task in tasks:
            task.cancel()


async def backlog(bootstrap: str, events: int, repeat: int) -> str:
    topic = f"lifecycle-{uuid.uuid4().hex[:8]}"
    await ensure_topics(KafkaSettings(bootstrap_servers=bootstrap), [topic], partitions=3)
    stream = traffic.stream(conversations=max(1, events // 11), prefix=topic, seed=repeat, templates=TEMPLATES)
    await traffic.produce_all(bootstrap, topic, stream[:events], _DAY)
    return topic


async def start_and_stop(bootstrap: str, workdir: Path, events: int, repeat: int, sig: signal.Signals) -> Seconds:
    """Exec to /healthz and /readyz, then ``sig`` mid-backlog with three live watchers: signal to exit."""
    topic = await backlog(bootstrap, events, repeat)
    with databases.fresh("sqlite", workdir) as url:
        vigil = VigilProcess(
            bootstrap=bootstrap, topic=topic, db_url=url, workdir=workdir / sig.name, partitions=3, settings=_BASE
        )
        started = time.monotonic()
        await vigil.start(timeout_s=60)
        healthz = time.monotonic() - started
        await until("ready", status_is(vigil.port, "/readyz", 200), 60)
        ready = time.monotonic() - started
        async with watchers(vigil.port, 3):
            await until("a quarter handled", lambda: _at_least(vigil, events / 4), 60)
            took, code = await timed_stop(vigil, sig)
    return {"healthz_s": healthz, "ready_s": ready, "stop_s": took, "exit_code": code}


async def _at_least(vigil: VigilProcess, count: float) -> bool:
    return (await vigil.snapshot()).handled >= count


async def second_signal(bootstrap: str, workdir: Path, repeat: int) -> Seconds:
    """A drain that cannot end (the message table locked): SIGINT, then SIGTERM once it drains; SIGTERM to exit."""
    topic = await backlog(bootstrap, 200, repeat)
    with databases.fresh("postgresql", workdir) as url:
        vigil = VigilProcess(
            bootstrap=bootstrap,
            topic=topic,
            db_url=url,
            workdir=workdir / "second",
            partitions=3,
            settings=_BASE | {"GRACEFUL_TIMEOUT_S": "300"},
        )
        await vigil.start(timeout_s=60)
        await until("some stored", lambda: _at_least(vigil, 1), 60)
        with psycopg.connect(databases.plain_url(url)) as lock:
            lock.execute("LOCK TABLE message IN ACCESS EXCLUSIVE MODE")
            await until("records in flight", lambda: _in_flight(vigil), 30)
            vigil.send(signal.SIGINT)
            await until("the drain", lambda: _logged(vigil, "records in flight"), 30)
            took, code = await timed_stop(vigil, signal.SIGTERM)
            lock.rollback()
    return {"second_signal_exit_s": took, "exit_code": code}


async def _in_flight(vigil: VigilProcess) -> bool:
    return await sample(vigil, "vigil_events_in_flight") > 0


async def _logged(vigil: VigilProcess, text: str) -> bool:
    return text in vigil.log()


async def frozen_broker(workdir: Path, repeat: int) -> Seconds:
    """The broker SIGSTOPped: freeze to /readyz 503; SIGCONT: thaw to /readyz 200."""
    with EmbeddedBroker(log_path=workdir / "frozen-broker.log") as broker:
        topic = await backlog(broker.bootstrap, 100, repeat)
        with databases.fresh("sqlite", workdir) as url:
            vigil = VigilProcess(
                bootstrap=broker.bootstrap,
                topic=topic,
                db_url=url,
                workdir=workdir / "frozen",
                partitions=3,
                settings=_BASE,
            )
            await vigil.start(timeout_s=60)
            await until("ready", status_is(vigil.port, "/readyz", 200), 60)
            os.kill(broker.pid, signal.SIGSTOP)
            try:
                unready = await until("unready", status_is(vigil.port, "/readyz", 503), 60)
            finally:
                os.kill(broker.pid, signal.SIGCONT)
            ready_again = await until("ready again", status_is(vigil.port, "/readyz", 200), 120)
            await vigil.stop()
    return {"unready_after_freeze_s": unready, "ready_after_thaw_s": ready_again}


async def unreachable_database(bootstrap: str, workdir: Path) -> Seconds:
    """Start-up retrying a database where nothing listens: SIGTERM to exit."""
    nowhere = f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/vigil"
    vigil = VigilProcess(
        bootstrap=bootstrap,
        topic=f"lifecycle-{uuid.uuid4().hex[:8]}",
        db_url=nowhere,
        workdir=workdir / "nodb",
        partitions=3,
        settings=_BASE | {"DATABASE__TIMEOUT_S": "1"},
    )
    await vigil.start(timeout_s=60)
    await until("retrying", lambda: _retried(vigil), 30)
    took, code = await timed_stop(vigil, signal.SIGTERM)
    return {"stop_while_retrying_s": took, "exit_code": code}


async def _retried(vigil: VigilProcess) -> bool:
    return await sample(vigil, "vigil_retries_total") >= 2


async def demo(workdir: Path) -> Seconds:
    """``vigil demo --no-traffic``: exec to /readyz 200, SIGINT to exit (its broker too)."""
    vigil = VigilProcess(
        bootstrap="",
        topic="vigil.events",
        db_url=f"sqlite+aiosqlite:///{workdir / 'demo.db'}",
        workdir=workdir / "demo",
        partitions=3,
        settings={"ANSWERS__ENABLED": "false"},
        command=("demo", "--no-traffic"),  # no bootstrap servers: the demo starts its own broker
    )
    started = time.monotonic()
    await vigil.start(timeout_s=120)
    await until("demo ready", status_is(vigil.port, "/readyz", 200), 120)
    ready = time.monotonic() - started
    took, code = await timed_stop(vigil, signal.SIGINT)
    return {"demo_ready_s": ready, "demo_stop_s": took, "exit_code": code}


@contextlib.asynccontextmanager
async def silent_server() -> AsyncIterator[str]:
    """An HTTP server that reads each request and never answers; yields its URL."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        await reader.read(65536)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        for writer in held:
            writer.close()
        server.close()


async def drafting_budget() -> Seconds:
    """A draft against a silent server: call to fallback (None), at the default budget."""
    async with silent_server() as url:
        settings = LlmSettings(api_key=SecretStr("sk-bench"), base_url=url, timeout_s=BUDGET_S)
        drafter = Drafter(settings, metrics=LlmMetrics(CollectorRegistry()), clock=SystemClock())
        try:
            started = time.monotonic()
            result = await drafter.draft("How do I set up an eSIM?", [DraftSource("esim", "eSIM", "Scan the QR.")])
            took = time.monotonic() - started
        finally:
            await drafter.aclose()
    if result is not None:
        raise AssertionError("a silent server produced a draft")
    return {"draft_abandoned_s": took, "draft_over_budget_s": took - BUDGET_S}


async def oidc_timeout() -> Seconds:
    """A sign-in against a silent provider: begin to AuthUnavailable, at the default timeout."""
    async with silent_server() as url:
        settings = OidcSettings(issuer=url, client_id="vigil", redirect_url="http://x/cb", timeout_s=OIDC_TIMEOUT_S)
        client = OidcClient(settings, clock=SystemClock())
        try:
            started = time.monotonic()
            try:
                await client.begin()
            except AuthUnavailable:
                took = time.monotonic() - started
            else:
                raise AssertionError("a silent provider let a sign-in begin")
        finally:
            await client.close()
    return {"oidc_gave_up_s": took, "oidc_over_timeout_s": took - OIDC_TIMEOUT_S}


TEMPLATES = traffic.load_templates()


def scenarios(bootstrap: str, here: Path, events: int, repeat: int) -> dict[str, Callable[[], Awaitable[Seconds]]]:
    """Each scenario of one repeat, by name, not started yet."""
    return {
        "sigterm": lambda: start_and_stop(bootstrap, here, events, repeat, signal.SIGTERM),
        "sigint": lambda: start_and_stop(bootstrap, here, events, repeat, signal.SIGINT),
        "second_signal": lambda: second_signal(bootstrap, here, repeat),
        "frozen_broker": lambda: frozen_broker(here, repeat),
        "unreachable_database": lambda: unreachable_database(bootstrap, here),
        "demo": lambda: demo(here),
        "drafting": drafting_budget,
        "oidc": oidc_timeout,
    }


async def run(repeats: int, events: int, workdir: Path, only: set[str] | None) -> list[dict[str, Any]]:
    """Every scenario (or those in ``only``) ``repeats`` times; one row per scenario and repeat."""
    rows: list[dict[str, Any]] = []
    with EmbeddedBroker(log_path=workdir / "broker.log") as broker:
        for repeat in range(repeats):
            here = workdir / f"r{repeat}"
            here.mkdir(parents=True, exist_ok=True)
            for name, scenario in scenarios(broker.bootstrap, here, events, repeat).items():
                if only is None or name in only:
                    row = {"scenario": name, "repeat": repeat, **await scenario()}
                    print(row, file=sys.stderr)
                    rows.append(row)
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """The median of each measured figure over the repeats (keyed scenario.figure)."""
    figures: dict[str, list[float]] = {}
    for row in rows:
        for key, value in row.items():
            if key not in ("scenario", "repeat", "exit_code"):
                figures.setdefault(f"{row['scenario']}.{key}", []).append(float(value))
    return {key: statistics.median(values) for key, values in figures.items()}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the medians, write the JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.lifecycle", description="vigil's lifecycle timings.")
    parser.add_argument("--quick", action="store_true", help="one repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--events", type=int, default=5000, help="backlog behind each stop")
    parser.add_argument("--only", help="comma-separated scenarios (default: all)")
    parser.add_argument("--workdir", type=Path, help="keep the logs here (default: a temp dir)")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    repeats = 1 if args.quick else args.repeats
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="vigil-lifecycle-")))
        workdir.mkdir(parents=True, exist_ok=True)
        rows = asyncio.run(run(repeats, args.events, workdir, only))
    medians = summary(rows)
    print(f"Medians of {repeats} run(s), seconds (graceful_timeout_s={GRACEFUL_TIMEOUT_S:g}):")
    for key, value in medians.items():
        print(f"  {key:45s} {value:8.3f}")
    exits = {row["scenario"]: row["exit_code"] for row in rows if "exit_code" in row}
    print(f"exit codes: {exits}")
    plan = {"repeats": repeats, "events": args.events, "graceful_timeout_s": GRACEFUL_TIMEOUT_S}
    plan |= {"llm_timeout_s": BUDGET_S, "oidc_timeout_s": OIDC_TIMEOUT_S, "settings": _BASE}
    output = report.save("lifecycle", argv, plan, {"runs": rows, "medians": medians})
    print(f"\nevery run: {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
