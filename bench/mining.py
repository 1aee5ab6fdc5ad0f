"""The miner's throughput, the knowledge store's growth, and search time as the store grows.

    python -m bench.mining                 # ~5 minutes: 10,000 real cases mined, then search at 1k/10k/100k entries
    python -m bench.mining --cases 2000 --entries 0
    python -m bench.mining --entries --parallel 2   # as `vigil mine --once` mines on this 2-core machine

**Cases.** The #ubuntu IRC threads of ``../shared/data/ubuntu-irc`` (9,160, jkkummerfeld/irc-disentanglement, train
split, CC BY 4.0), converted as ``eval/ubuntu_irc.py --cases`` converts them (each thread a case, closed as
resolved by a human at its last line), stored in a fresh SQLite through the case store (not timed). Beyond 9,160 the
threads are taken again under new conversation ids (``#2``), which the miner treats as new cases that repeat known
problems. Then the miner runs as the daemon's job does (redaction, the real model on one thread, Chroma on disk;
with ``--parallel N``, as ``vigil mine --once`` does on N cores),
once at each tenth of the cases' closing times, and each run is timed: wall time, CPU, cases dealt with (mined or
skipped as too thin), entries by kind, and the size on disk of SQLite and Chroma.

**Search as the store grows** (``--entries``): ``bench.answers.store_at_scale``, the bundled help centre grown with
synthetic one-passage entries to 1,000, 10,000 and 100,000, each of the 195 Brightwave phrasings searched as the
answer skill searches: the same measure as the answers benchmark's, at the sizes issue 12 names.

Writes ``bench/results/mining-<UTC time>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.answers import store_at_scale
from bench.eval_phrasings import phrasings
from bench.knowledge_env import SHARED
from eval.ubuntu_irc import Selection, events, read_threads
from vigil.app.settings import Settings
from vigil.cases.store import CaseStore
from vigil.core.clock import SystemClock
from vigil.flow.settings import IngestSettings
from vigil.knowledge.store import standalone
from vigil.mining.miner import Miner, Report
from vigil.wire.events import parse

RESULTS = Path(__file__).resolve().parent / "results"
THREADS = SHARED / "ubuntu-irc" / "threads-train.jsonl.gz"

LIMITS = IngestSettings()
"""What ingest accepts: the events are parsed as the daemon parses them."""


def case_events(count: int) -> list[dict[str, Any]]:
    """``count`` IRC threads as v1 events with their case events, repeated under new ids past the 9,160."""
    threads = read_threads(THREADS)
    chosen: list[dict[str, Any]] = []
    round_ = 1
    while len(chosen) < count:
        for thread in threads[: count - len(chosen)]:
            if round_ == 1:
                chosen.append(thread)
            else:
                chosen.append({**thread, "thread_id": f"{thread['thread_id']}#{round_}"})
        round_ += 1
    lines = events(chosen, Selection(), cases=True)
    if round_ > 2:  # message ids are the log's lines: give the repeats their own
        seen: Counter[str] = Counter()
        for line in lines:
            if line["type"] == "message":
                seen[line["message_id"]] += 1
                if seen[line["message_id"]] > 1:
                    line["message_id"] = f"{line['message_id']}#{seen[line['message_id']]}"
    return lines


async def store_cases(lines: list[dict[str, Any]], settings: Settings) -> None:
    """Every event into the case store, many conversations at once, as ingest writes them."""
    store = CaseStore.from_settings(
        settings.database,
        data_dir=settings.data_dir,
        clock=SystemClock(),
        default_tenant="default",
        future_skew_s=86_400,
    )
    await store.migrate()
    try:
        parsed = [
            parse(
                json.dumps(line).encode(), max_event_bytes=LIMITS.max_event_bytes, max_text_bytes=LIMITS.max_text_bytes
            )
            for line in lines
        ]
        by_conversation: dict[str, list[Any]] = {}
        for event in parsed:
            by_conversation.setdefault(event.conversation_id, []).append(event)

        async def one(conversation: list[Any]) -> None:
            for event in conversation:
                await store.record(event)

        queue = list(by_conversation.values())
        for start in range(0, len(queue), 256):
            await asyncio.gather(*(one(c) for c in queue[start : start + 256]))
    finally:
        await store.close()


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


async def mine(lines: list[dict[str, Any]], settings: Settings, folder: Path, steps: int) -> list[dict[str, Any]]:
    closings = sorted(
        datetime.fromisoformat(line["at"].replace("Z", "+00:00"))
        for line in lines
        if line["type"] == "case" and line["event"] == "closed"
    )
    rows: list[dict[str, Any]] = []
    async with standalone(settings.knowledge, settings.database, data_dir=settings.data_dir) as knowledge:
        miner = Miner(settings.miner, engine=knowledge.engine, knowledge=knowledge, clock=SystemClock())
        total = Report()
        for step in range(1, steps + 1):
            until = closings[min(len(closings) - 1, len(closings) * step // steps - 1)]
            cpu = time.process_time()
            wall = time.perf_counter()
            done = await miner.run(until)
            took, cpu_took = time.perf_counter() - wall, time.process_time() - cpu
            total.add(done)
            stats = await knowledge.stats()
            dealt = done.mined + sum(done.skipped.values())
            rows.append(
                {
                    "until": until.isoformat(),
                    "cases": dealt,
                    "mined": done.mined,
                    "skipped": dict(done.skipped),
                    "merged": done.merged,
                    "wall_s": took,
                    "cpu_s": cpu_took,
                    "cases_per_s": dealt / took if took else None,
                    "cumulative_cases": total.mined + sum(total.skipped.values()),
                    "cumulative_mined": total.mined,
                    "entries": {k: v for k, v in stats.items() if k != "passages"},
                    "sqlite_mib": _size(folder / "vigil.db") / 2**20,
                    "chroma_mib": _size(folder / "chroma") / 2**20,
                }
            )
            print(
                f"  to {until:%Y-%m-%d}: {dealt} cases ({done.mined} mined, {done.merged} merged) in {took:.1f} s "
                f"({rows[-1]['cases_per_s']:.0f}/s, CPU {cpu_took:.1f} s); entries {rows[-1]['entries']}; "
                f"SQLite {rows[-1]['sqlite_mib']:.1f} MiB, Chroma {rows[-1]['chroma_mib']:.1f} MiB",
                flush=True,
            )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| cases dealt with (cumulative) | mined (cumulative) | this run: cases/s | entries (case / faq) "
        "| SQLite MiB | Chroma MiB |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r['cumulative_cases']:,} | {r['cumulative_mined']:,} | {r['cases_per_s']:.0f} | "
            f"{r['entries'].get('case', 0):,} / {r['entries'].get('faq', 0):,} | {r['sqlite_mib']:.1f} | "
            f"{r['chroma_mib']:.1f} |"
        )
    return "\n".join(out)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="vigil-mining-"))
    try:
        settings = Settings(_env_file=None, data_dir=folder)  # type: ignore[call-arg]
        if args.parallel is not None:
            settings.miner.embed_parallelism = args.parallel
        lines = case_events(args.cases)
        started = time.perf_counter()
        await store_cases(lines, settings)
        print(
            f"stored {len(lines):,} events of {args.cases:,} cases in {time.perf_counter() - started:.0f} s", flush=True
        )
        wall = time.perf_counter()
        rows = await mine(lines, settings, folder, args.steps)
        mining_s = time.perf_counter() - wall
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    scale = await store_at_scale(args.entries, [row["text"] for row in phrasings()]) if args.entries else []
    return {
        "command": "python -m bench.mining " + " ".join(f"--{k} {v}" for k, v in vars(args).items()),
        "when": datetime.now(UTC).isoformat(),
        "machine": {"cpus": os.cpu_count(), "load": os.getloadavg()},
        "cases": args.cases,
        "mining_wall_s": mining_s,
        "cases_per_s": sum(r["cases"] for r in rows) / mining_s,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "runs": rows,
        "search_at_scale": scale,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mining", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=10, help="miner runs, each up to the next tenth of closings")
    parser.add_argument("--entries", type=int, nargs="*", default=[1_000, 10_000, 100_000])
    parser.add_argument(
        "--parallel",
        type=int,
        default=None,
        help="embedding calls at once (VIGIL_MINER__EMBED_PARALLELISM); default: the daemon's, 1; "
        "`vigil mine --once` uses one per core",
    )
    args = parser.parse_args(argv)
    result = asyncio.run(run(args))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"mining-{datetime.now(UTC):%Y%m%d-%H%M%S}.json"
    out.write_text(json.dumps(result, indent=1))
    print(table(result["runs"]))
    print(
        f"mined {result['cases']:,} cases in {result['mining_wall_s']:.1f} s ({result['cases_per_s']:.0f} cases/s); "
        f"peak RSS {result['peak_rss_mib']:.0f} MiB"
    )
    for row in result["search_at_scale"]:
        print(
            f"  {row['passages']:,} passages: search p50 {row['search_p50_ms']:.1f} ms, "
            f"p99 {row['search_p99_ms']:.1f} ms"
        )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
