"""Throughput with 1, 2 and 3 processes on the same input (issue 29), as a ratio to one process.

Each run: a fresh PostgreSQL database (the replicas' shared store) and a new 6-partition topic on a Tansu broker;
``k`` ``vigil run`` processes start in one consumer group, each a static member under its own name
(``vigil-0``...), and the run waits until every one is ready (joined and holding its partitions) and the group has
kept the same assignment for ``--settle-s``. Then the backlog (``--events`` of the full demo mix, ``bench.traffic``)
is produced at once and the window runs from the first event handled by any process until the last is handled, read
from every process's ``/metrics``. Two configurations: ``answers-off`` and ``default`` (answers on, the bundled help
centre imported at start). CPU is each process's own (``/proc``); the machine has 2 cores, so 2 processes can at most
double one process's rate if one process used one core, and the ratio says how near they come.

Run: ``python -m bench.scale`` (about 10 minutes; ``--processes 1 2 3``, ``--variants``, ``--repeats``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
import sqlalchemy as sa

from bench import databases, report, traffic
from bench.daemon import VigilProcess
from bench.ingest import VARIANTS, filled_topic
from bench.linux import MachineTimes
from vigil.dev.broker import EmbeddedBroker

PARTITIONS = 6


async def _poll(check: Callable[[], Awaitable[Any]], every_s: float) -> Any:
    """``check()`` every ``every_s`` until it is truthy; its value."""
    while True:
        value = await check()
        if value:
            return value
        await asyncio.sleep(every_s)


async def _ready(vigil: VigilProcess, timeout_s: float = 240.0) -> None:
    async with asyncio.timeout(timeout_s), httpx.AsyncClient(timeout=3.0) as http:

        async def ready() -> bool:
            return (await http.get(f"http://127.0.0.1:{vigil.port}/readyz")).status_code == 200

        await _poll(ready, 0.2)


async def _settled(group: list[VigilProcess], settle_s: float, timeout_s: float = 120.0) -> None:
    """Until no process has logged a new assignment for ``settle_s``: the group's rebalances are over."""
    async with asyncio.timeout(timeout_s):
        last, since = -1, time.monotonic()
        while True:
            assigned = sum(p.log().count("assigned partitions:") for p in group)
            if assigned != last:
                last, since = assigned, time.monotonic()
            elif time.monotonic() - since >= settle_s:
                return
            await asyncio.sleep(0.2)


def _connections(db_url: str) -> int:
    """The connections the replicas hold open to their database now (their pools stay open once grown)."""
    name = sa.make_url(db_url).database
    with psycopg.connect(databases.PG_ADMIN, autocommit=True) as admin:
        row = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (name,)).fetchone()
    return int(row[0]) if row else 0


async def _handled(group: list[VigilProcess]) -> float:
    return sum(s.handled for s in await asyncio.gather(*(p.snapshot() for p in group)))


async def drain(
    bootstrap: str, backlog: list[traffic.Event], processes: int, variant: str, workdir: Path, settle_s: float
) -> dict[str, Any]:
    """``processes`` replicas drain ``backlog``; the rate from the first event handled to the last."""
    with databases.fresh("postgresql", workdir) as db_url:
        topic = await filled_topic(bootstrap, [], PARTITIONS)
        group = [
            VigilProcess(
                bootstrap=bootstrap,
                topic=topic,
                db_url=db_url,
                workdir=workdir / f"vigil-{n}",
                partitions=PARTITIONS,
                # A static member keeps its place only while its session outlasts a join (about 8 s on Tansu).
                settings=VARIANTS[variant]
                | {"KAFKA__GROUP_INSTANCE_ID": f"vigil-{n}", "KAFKA__SESSION_TIMEOUT_S": "20"},
            )
            for n in range(processes)
        ]
        try:
            for vigil in group:  # one after the other: concurrent migrations of one fresh database would race
                await vigil.start(timeout_s=240)
                await _ready(vigil)
            await _settled(group, settle_s)
            await traffic.produce_burst(bootstrap, topic, backlog)
            async with asyncio.timeout(240):
                await _poll(lambda: _handled(group), 0.05)
            started, machine = time.monotonic(), MachineTimes.now()
            cpu = [p.cpu_seconds() for p in group]
            handled = await _handled(group)

            async def all_handled() -> float:
                done = await _handled(group)
                return done if done >= len(backlog) else 0.0

            async with asyncio.timeout(600):
                done = await _poll(all_handled, 0.1)
            seconds = time.monotonic() - started
            used = sum(p.cpu_seconds() - c for p, c in zip(group, cpu, strict=True))
            return {
                "processes": processes,
                "variant": variant,
                "events": len(backlog),
                "events_per_s": (done - handled) / seconds,
                "window_s": seconds,
                "vigil_cores": used / seconds,
                "vigil_cpu_ms_per_event": used * 1000 / max(done - handled, 1),
                "machine_cores": MachineTimes.now().busy_cores_since(machine),
                "peak_rss_mib": [round(p.peak_rss_bytes() / 2**20) for p in group],
                "postgresql_connections": _connections(db_url),
            }
        finally:
            await asyncio.gather(*(p.stop() for p in group), return_exceptions=True)


async def run(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    templates = traffic.mixed(traffic.load_templates(), "full")
    conversations = math.ceil(args.events / (sum(len(t) for t in templates) / len(templates)))
    rows = []
    with EmbeddedBroker() as broker:
        for repeat in range(args.repeats):
            for variant in args.variants:
                for k in args.processes:
                    prefix = f"scale-{repeat}-{variant}-{k}"
                    backlog = traffic.stream(
                        conversations=conversations, prefix=prefix, seed=repeat, templates=templates
                    )[: args.events]
                    row = await drain(broker.bootstrap, backlog, k, variant, workdir / prefix, args.settle_s)
                    rows.append(row | {"repeat": repeat})
                    print(
                        f"{variant}, {k} process(es): {row['events_per_s']:,.0f} events/s, "
                        f"{row['vigil_cpu_ms_per_event']:.2f} ms CPU an event, {row['vigil_cores']:.2f} cores",
                        file=sys.stderr,
                        flush=True,
                    )
    return rows


def ratios(rows: list[dict[str, Any]]) -> dict[str, dict[int, dict[str, float]]]:
    """Per variant and process count: the median rate, and the median of each repeat's ratio to one process."""
    out: dict[str, dict[int, dict[str, float]]] = {}
    for variant in sorted({r["variant"] for r in rows}):
        mine = [r for r in rows if r["variant"] == variant]
        ones = {r["repeat"]: r["events_per_s"] for r in mine if r["processes"] == 1}
        out[variant] = {}
        for k in sorted({r["processes"] for r in mine}):
            at_k = [r for r in mine if r["processes"] == k]
            out[variant][k] = {
                "events_per_s": statistics.median(r["events_per_s"] for r in at_k),
                "cpu_ms_per_event": statistics.median(r["vigil_cpu_ms_per_event"] for r in at_k),
                "ratio_to_one": statistics.median(
                    r["events_per_s"] / ones[r["repeat"]] for r in at_k if r["repeat"] in ones
                )
                if ones
                else math.nan,
            }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=6000, help="events of the full demo mix in each backlog")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--variants", nargs="+", default=["answers-off", "default"], choices=sorted(VARIANTS))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--settle-s", type=float, default=10.0, help="the group's assignment unchanged this long")
    parser.add_argument("--workdir", type=Path, help="keep the processes' logs here")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="vigil-scale-")))
        rows = asyncio.run(run(args, workdir))
    result = {"runs": rows, "ratios": ratios(rows)}
    for variant, by_k in result["ratios"].items():
        for k, figures in by_k.items():
            print(
                f"{variant:12} {k} process(es): {figures['events_per_s']:8,.0f} events/s  "
                f"{figures['ratio_to_one']:.2f}x one  {figures['cpu_ms_per_event']:.2f} ms CPU an event"
            )
    print(f"saved: {report.save('scale', argv, vars(args) | {'workdir': str(args.workdir)}, result)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
