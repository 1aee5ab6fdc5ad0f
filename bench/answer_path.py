"""Where the answer path spends the event loop's time: the daemon's own pipeline in process, profiled with cProfile.

The daemon's composition (``vigil.app.evaluation.composed``: the real gates, skills, SQLite case store, the bundled
help centre imported, the real model) handles the question set of ``bench.answers`` (chosen before vigil runs),
each question a customer message in a new conversation, ``--concurrency`` conversations at a time as ingest's lanes
would run them. No broker: what is left is vigil's own work per question.

The event loop is one thread, and whatever it spends per question caps the process however fast the model is. The
model and Chroma run on worker threads, which cProfile does not see, so the profile is of the loop alone; the
process's CPU time per question (all threads) is printed beside it. The table groups the loop's time by step:
vigil's case store, gates and skill, the knowledge store, SQLAlchemy, asyncio, and idle (waiting on the threads).

Run: ``python -m bench.answer_path`` (about a minute); ``--top N`` lists the N functions with the most own time.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import report
from bench.answers import KNOWLEDGE_PATHS, question_set
from vigil.app.evaluation import composed
from vigil.app.settings import Settings
from vigil.core.clock import ManualClock
from vigil.wire.events import Message, Suggestion

# Where a function's own time is counted: the first of these its file's path holds.
PARTS = (
    ("vigil/cases/", "vigil: case store"),
    ("vigil/answers/", "vigil: answers (gates, skill)"),
    ("vigil/knowledge/", "vigil: knowledge store"),
    ("vigil/flow/", "vigil: pipeline"),
    ("vigil/", "vigil: other"),
    ("sqlalchemy/", "SQLAlchemy"),
    ("aiosqlite/", "aiosqlite"),
    ("bm25s/", "bm25s"),
    ("numpy/", "NumPy"),
    ("pydantic", "pydantic"),
    ("asyncio/", "asyncio"),
    ("select.epoll", "idle (waiting for the model, Chroma, SQLite)"),
    ("_thread.lock", "idle (waiting for the model, Chroma, SQLite)"),
)


class CountingSink:
    """Counts what the pipeline publishes."""

    name = "memory"

    def __init__(self) -> None:
        self.published = 0

    async def start(self) -> None:
        """Nothing to connect."""

    async def publish(self, suggestion: Suggestion) -> None:
        self.published += 1

    async def close(self) -> None:
        """Nothing to close."""


async def run(questions: list[str], concurrency: int, profile: cProfile.Profile) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="vigil-answer-path-"))
    settings = Settings(
        _env_file=None,
        data_dir=folder,
        answers={"enabled": True},
        knowledge={"paths": [str(p) for p in KNOWLEDGE_PATHS]},
    )
    clock = ManualClock(datetime.now(UTC))
    sink = CountingSink()
    parts = composed(settings, clock, sink)
    await parts.start()
    try:
        pipeline = parts.pipeline()

        def message(n: int, text: str) -> Message:
            cid = f"path-{n:05d}"
            return Message(
                type="message",
                schema_version=1,
                message_id=f"{cid}-m1",
                conversation_id=cid,
                tenant="brightwave",
                role="customer",
                author="customer",
                text=text,
                sent_at=clock.now(),
            )

        warm = [message(100_000 + n, q) for n, q in enumerate(questions[:32])]
        await asyncio.gather(*(pipeline.handle(m, clock.monotonic()) for m in warm))
        sink.published = 0
        events = [message(n, q) for n, q in enumerate(questions)]

        async def waves() -> None:
            for start in range(0, len(events), concurrency):
                wave = events[start : start + concurrency]
                await asyncio.gather(*(pipeline.handle(m, clock.monotonic()) for m in wave))

        # First without the profiler, for the times; then again (new conversations) under it, for where they go.
        cpu, loop_cpu, wall = time.process_time(), time.thread_time(), time.perf_counter()
        await waves()
        cpu, loop_cpu, wall = time.process_time() - cpu, time.thread_time() - loop_cpu, time.perf_counter() - wall
        published = sink.published
        events = [message(200_000 + n, q) for n, q in enumerate(questions)]
        profile.enable()
        await waves()
        profile.disable()
    finally:
        await parts.close()
    return {"questions": len(events), "published": published, "cpu_s": cpu, "loop_cpu_s": loop_cpu, "wall_s": wall}


def by_part(stats: pstats.Stats, questions: int) -> list[tuple[str, float]]:
    """The loop's own time per question (ms) in each of ``PARTS`` (and the rest), most first."""
    found: dict[str, float] = {}
    for (file, _, function), (_, _, own, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{file} {function}"
        part = next((name for needle, name in PARTS if needle in where), "other")
        found[part] = found.get(part, 0.0) + own * 1000 / questions
    return sorted(found.items(), key=lambda item: -item[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.answer_path", description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=64, help="conversations handled at once (default 64)")
    parser.add_argument("--top", type=int, default=25, help="functions listed by own time (default 25)")
    parser.add_argument("--json", type=Path, help="where to write the results (default bench/results/...)")
    args = parser.parse_args(argv)
    questions = [text for _, text in question_set()]
    profile = cProfile.Profile()
    figures = asyncio.run(run(questions, args.concurrency, profile))
    stats = pstats.Stats(profile)
    loop_s = stats.total_tt  # type: ignore[attr-defined]
    n = figures["questions"]
    print(
        f"{n} questions ({figures['published']} answered), {args.concurrency} at a time: "
        f"{n / figures['wall_s']:.0f} questions/s in process; CPU per question {figures['cpu_s'] * 1000 / n:.2f} ms "
        f"(all threads), of which the event loop's thread {figures['loop_cpu_s'] * 1000 / n:.2f} ms\n"
    )
    rows = by_part(stats, n)
    print("| where the event loop's time goes (under cProfile) | ms per question |\n|---|---:|")
    for part, ms in rows:
        print(f"| {part} | {ms:.2f} |")
    print()
    stats.sort_stats("tottime").print_stats(args.top)
    output = report.save(
        "answer_path",
        argv,
        {"concurrency": args.concurrency},
        figures | {"profiled_loop_s": loop_s, "profiled_ms_per_question": dict(rows)},
        args.json,
    )
    print(f"results: {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
