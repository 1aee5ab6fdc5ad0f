"""Ingest benchmark: how fast vigil takes the conversation stream into its case store, and how quickly.

For each repeat, traffic mix (``--mixes``: ``full``, ``non-questions``; see ``bench.traffic``), vigil configuration
(``--variants``: ``default``, ``answers-off``, ``no-knowledge``; see ``VARIANTS``) and database (SQLite, PostgreSQL),
on a Tansu broker and a fresh database of the benchmark's own:

1. **Throughput**: ``--events`` realistic v1 events (``bench.traffic``) are produced to a new 6-partition topic;
   then ``vigil run`` starts in its own process and drains it. The window runs from the first event handled (the
   consumer-group join is excluded) until the last one is, read from vigil's ``/metrics`` every 0.1 s.
2. **Latency**: the same process then gets new conversations at ``--rate`` events/s for ``--latency-s``. Processing
   time comes from vigil's ``vigil_event_processing_seconds`` histogram (record received to fully handled);
   produce-to-stored time from the rows' ``sent_at`` against when they became visible (``bench.watcher``).
3. **Memory**: vigil's peak RSS (``VmHWM``) at the end.

Each repeat also runs a bare aiokafka consumer on the same content (``bench.bare``), once per mix: vigil's
throughput is quoted as a share of it. Results are medians over repeats; a JSON file keeps every run.

Run: ``python -m bench.ingest`` (about 25 minutes) or ``python -m bench.ingest --quick`` (a smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import math
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import databases, phases, report, traffic
from bench.bare import measure as measure_bare
from bench.daemon import VigilProcess
from vigil.dev.broker import EmbeddedBroker
from vigil.transport.kafka import ensure_topics
from vigil.transport.settings import KafkaSettings

_ROOT = Path(__file__).resolve().parent.parent
_KNOWLEDGE = _ROOT / "knowledge"
_PROFILE_RATE = 250  # py-spy samples/s: a window of a few seconds needs more than the default 100

VARIANTS: dict[str, dict[str, str]] = {
    # What `vigil run` does with nothing set (answers on, implicit requests on, the ONNX embedder), with the bundled
    # help centre as its knowledge, imported at start-up as `vigil demo` (`make run`) does: `vigil run` itself
    # imports no knowledge unless VIGIL_KNOWLEDGE__PATHS names some.
    "default": {"KNOWLEDGE__PATHS": json.dumps([str(_KNOWLEDGE / "articles"), str(_KNOWLEDGE / "faqs")])},
    "answers-off": {"ANSWERS__ENABLED": "false"},
    # `vigil run` exactly as shipped: answers on, but no knowledge to answer from.
    "no-knowledge": {},
}
"""vigil's configurations, as settings (environment variables without ``VIGIL_``) on top of its defaults."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What one benchmark run does."""

    events: int = 20_000
    conversations: int = 2_000
    rate: float = 500.0
    latency_s: float = 20.0
    repeats: int = 3
    databases: tuple[str, ...] = databases.KINDS
    mixes: tuple[str, ...] = traffic.MIXES
    variants: tuple[str, ...] = ("default", "answers-off")
    partitions: int = 6
    bare_records: int = 200_000
    """The bare consumer re-reads the topic until it has read this many records (one pass is too short to time)."""
    settings: tuple[tuple[str, str], ...] = ()
    """More vigil settings for every run (after the variant's), e.g. ``("KAFKA__FETCH_MAX_RECORDS", "200")``."""
    drain_timeout_s: float = 600.0


QUICK = Plan(events=5_000, conversations=330, latency_s=5.0, repeats=1, bare_records=50_000)


@dataclass(frozen=True, slots=True)
class _Feed:
    """What one vigil run reads: a topic holding ``backlog`` events, then ``live`` ones sent at the plan's rate."""

    bootstrap: str
    topic: str
    backlog: int
    live: list[traffic.Event]


@dataclass(frozen=True, slots=True)
class _Cell:
    """One vigil run's configuration: its variant, its traffic mix and its database."""

    variant: str
    mix: str
    database: str

    @property
    def name(self) -> str:
        return f"{self.variant}-{self.mix}-{self.database}"


async def run(plan: Plan, workdir: Path, profile: Path | None) -> tuple[list[dict[str, Any]], dict[str, list[float]]]:
    """Every repeat of every mix, variant and database; returns one row per vigil run and the bare consumer's rate
    per mix and repeat."""
    everything = traffic.load_templates()
    rows: list[dict[str, Any]] = []
    bare: dict[str, list[float]] = {mix: [] for mix in plan.mixes}
    with EmbeddedBroker(log_path=workdir / "broker.log") as broker:
        for repeat in range(plan.repeats):
            for mix in plan.mixes:
                templates = traffic.mixed(everything, mix)
                backlog = traffic.stream(conversations=plan.conversations, prefix="conv", seed=1, templates=templates)
                backlog = backlog[: plan.events]
                shortest = min(len(t) for t in templates)
                live_conversations = math.ceil(plan.rate * plan.latency_s * 1.2 / shortest) + 1
                cells = [_Cell(v, mix, d) for v in plan.variants for d in plan.databases]
                order = cells if repeat % 2 == 0 else cells[::-1]  # spread drift over all of them
                topics = {cell: await filled_topic(broker.bootstrap, backlog, plan.partitions) for cell in order}
                bare[mix].append(
                    await measure_bare(broker.bootstrap, topics[order[0]], len(backlog), plan.bare_records)
                )
                _progress(f"repeat {repeat + 1}, {mix}: bare consumer {bare[mix][-1]:,.0f} events/s")
                for number, cell in enumerate(order):
                    prefix = f"live{repeat}-{number}-{mix[:3]}"
                    live = traffic.stream(
                        conversations=live_conversations, prefix=prefix, seed=repeat, templates=templates
                    )
                    feed = _Feed(broker.bootstrap, topics[cell], len(backlog), live)
                    one = await _vigil_run(cell, repeat, feed, plan, workdir, profile)
                    rows.append({"variant": cell.variant, "mix": mix} | one.row(bare[mix][-1]))
                    _progress(f"repeat {repeat + 1}: {cell.name} {rows[-1]['events_per_s']:,.0f} events/s")
    return rows, bare


async def _vigil_run(
    cell: _Cell, repeat: int, feed: _Feed, plan: Plan, root: Path, profile: Path | None
) -> report.VigilRun:
    """Start vigil on a fresh database, drain the backlog, follow the live feed, stop it, count what it stored."""
    kind = cell.database
    workdir = root / f"{repeat}-{cell.name}"
    with databases.fresh(kind, workdir) as db_url:
        vigil = VigilProcess(
            bootstrap=feed.bootstrap,
            topic=feed.topic,
            db_url=db_url,
            workdir=workdir,
            partitions=plan.partitions,
            settings=VARIANTS[cell.variant] | dict(plan.settings),
        )
        try:
            await vigil.start()
            window = (
                functools.partial(_profiled, vigil, profile / f"vigil-{cell.name}-{repeat}.txt")
                if profile is not None
                else contextlib.nullcontext
            )
            throughput = await phases.drain(vigil, feed.backlog, timeout_s=plan.drain_timeout_s, window=window)
            latency = await phases.follow(
                vigil,
                db_url=db_url,
                bootstrap=feed.bootstrap,
                topic=feed.topic,
                events=iter(feed.live),
                rate=plan.rate,
                duration_s=plan.latency_s,
            )
            final, peak_rss = await vigil.snapshot(), vigil.peak_rss_bytes()
        finally:
            exit_code = await vigil.stop()
        stored = databases.stored_events(db_url)
    return report.VigilRun(
        kind, repeat, throughput, latency, peak_rss, final.dead_lettered, stored, feed.backlog + latency.sent, exit_code
    )


@contextlib.contextmanager
def _profiled(vigil: VigilProcess, output: Path) -> Iterator[None]:
    """py-spy on vigil while the throughput window is open (not start-up, not the latency phase)."""
    profiler = vigil.profile(output, rate=_PROFILE_RATE)
    try:
        yield
    finally:
        profiler.send_signal(signal.SIGINT)
        profiler.wait(60)


async def filled_topic(bootstrap: str, backlog: list[traffic.Event], partitions: int) -> str:
    """A new topic of ``partitions`` partitions holding ``backlog``, stamped as of yesterday."""
    topic = f"bench-{uuid.uuid4().hex[:10]}"
    await ensure_topics(KafkaSettings(bootstrap_servers=bootstrap), [topic], partitions=partitions)
    await traffic.produce_all(bootstrap, topic, backlog, datetime.now(UTC) - timedelta(days=1))
    return topic


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest", description="vigil's ingest benchmark.")
    parser.add_argument("--quick", action="store_true", help="a short smoke run (one repeat, 5,000 events)")
    parser.add_argument("--events", type=int, help="events pre-produced for the throughput phase")
    parser.add_argument("--rate", type=float, help="events/s of the latency phase")
    parser.add_argument("--latency-s", type=float, help="seconds of the latency phase")
    parser.add_argument("--repeats", type=int, help="runs per database (the table shows medians)")
    parser.add_argument("--databases", help="comma-separated: sqlite,postgresql")
    parser.add_argument("--mixes", help=f"comma-separated traffic mixes: {','.join(traffic.MIXES)} (default both)")
    parser.add_argument(
        "--variants", help=f"comma-separated vigil configurations: {','.join(VARIANTS)} (default: default,answers-off)"
    )
    parser.add_argument("--json", type=Path, help="where to write every run (default bench/results/ingest-*.json)")
    parser.add_argument(
        "--profile", type=Path, help="directory for py-spy profiles of each vigil run's throughput window"
    )
    parser.add_argument("--workdir", type=Path, help="keep the broker's and vigil's logs here (default: a temp dir)")
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a vigil setting for every run, as its environment variable without VIGIL_ (KAFKA__FETCH_MAX_RECORDS=200)",
    )
    return parser


def _plan(args: argparse.Namespace) -> Plan:
    plan = QUICK if args.quick else Plan()
    changes: dict[str, Any] = {
        name: getattr(args, name) for name in ("events", "rate", "latency_s", "repeats") if getattr(args, name)
    }
    if args.events:
        changes["conversations"] = max(1, round(args.events / 15))
    for name, known in (("databases", databases.KINDS), ("mixes", traffic.MIXES), ("variants", tuple(VARIANTS))):
        if getattr(args, name):
            chosen = tuple(getattr(args, name).split(","))
            if unknown := [c for c in chosen if c not in known]:
                raise SystemExit(f"--{name}: unknown {', '.join(unknown)}; use {','.join(known)}")
            changes[name] = chosen
    if args.setting:
        changes["settings"] = tuple(tuple(item.split("=", 1)) for item in args.setting)
    return dataclasses.replace(plan, **changes)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the table, write the JSON."""
    args = _parser().parse_args(argv)
    plan = _plan(args)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="vigil-bench-")))
        workdir.mkdir(parents=True, exist_ok=True)
        rows, bare = asyncio.run(run(plan, workdir, args.profile))
    summary = report.medians(rows, by=("variant", "mix", "database"))
    bare_medians = {mix: statistics.median(rates) for mix, rates in bare.items()}
    print(report.side_by_side(summary, bare_medians, plan.repeats))
    print()
    print(report.table(summary, bare_medians, plan.repeats, plan.rate))
    print()
    print("\n".join(report.verdicts(summary)))
    results = {
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "bare_events_per_s": bare,
        "runs": rows,
        "medians": summary | {f"bare/{mix}": {"events_per_s": rate} for mix, rate in bare_medians.items()},
    }
    output = report.save("ingest", argv, dataclasses.asdict(plan), results, args.json)
    print(f"\nevery run: {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
