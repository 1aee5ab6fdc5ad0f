"""CPU per event by skill: where a process's CPU goes for each event of the demo mix, skill by skill.

The daemon's own composition runs in process (every capability a replay sets up: answers, progress, actions with
the demo's rulebook, the miner; SQLite in a temp dir; the bundled help centre; the real model; no broker, no
scheduler) and handles ``--events`` events of the demo mix (``bench.traffic``, the ``full`` mix: customers,
analysts, bots, case events), **one at a time**, on a simulated clock moved to each event's time. Around each step
it reads the process's CPU time (all threads: the model's and SQLite's included), so with one event in flight each
step's CPU is its own:

- **recording**: ``CaseStore.record`` (the event stored and applied to its case, in its group-committed
  transaction: a batch of one here), without its keepers;
- **keeper:NAME**: each capability's writes in that transaction (``vigil.flow.keeping``);
- **skill:NAME**: each skill's ``propose`` (its reads and writes, and for answers the embedding and the search);
- **the rest**: gates, storing and publishing suggestions, the pipeline itself: the event's total less the above.

Then ``--concurrent`` conversations at a time (each conversation's events in order, as ingest's lanes run them) on
new conversations of the same mix, for the CPU per event when transactions are shared (no breakdown: steps overlap).

Run: ``python -m bench.skills_cpu`` (a minute or two). Re-run after a change to a skill or the store, and compare
with the table in docs/benchmarks.md ("CPU per event by skill").
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from bench import report, traffic
from bench.answer_path import CountingSink
from bench.answers import KNOWLEDGE_PATHS
from vigil.app.evaluation import composed
from vigil.app.settings import Settings
from vigil.core.clock import ManualClock
from vigil.flow.case import CaseState, Recorded
from vigil.flow.keeping import BatchKeeper, Keeper, Kept, keep_all
from vigil.flow.skills import Proposal, Skill
from vigil.wire.events import Event, parse

_LIMIT = 1 << 20


class Ledger:
    """CPU seconds and calls per step."""

    def __init__(self) -> None:
        self.cpu_s: defaultdict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()

    def add(self, step: str, began: float) -> None:
        self.cpu_s[step] += time.process_time() - began
        self.calls[step] += 1


class TimedSkill:
    """A skill whose ``propose`` is charged to ``skill:NAME``."""

    def __init__(self, skill: Skill, ledger: Ledger) -> None:
        self._skill = skill
        self._ledger = ledger
        self.name = skill.name
        self.kind = skill.kind

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        began = time.process_time()
        try:
            return await self._skill.propose(event, case)
        finally:
            self._ledger.add(f"skill:{self.name}", began)


class TimedKeeper:
    """A keeper (one per event, or one per batch) whose writes are charged to ``keeper:NAME``."""

    def __init__(self, keeper: Keeper | BatchKeeper, ledger: Ledger) -> None:
        self._keeper = keeper
        self._ledger = ledger
        self.name = keeper.name

    async def keep_batch(self, conn: AsyncConnection, kept: Sequence[Kept]) -> None:
        began = time.process_time()
        try:
            await keep_all(conn, [self._keeper], kept)
        finally:
            self._ledger.add(f"keeper:{self.name}", began)


def demo_events(count: int, prefix: str, day: datetime) -> list[Event]:
    """``count`` events of the full demo mix, as ingest would parse them, stamped on ``day``."""
    templates = traffic.load_templates()
    per_conversation = sum(len(t) for t in templates) / len(templates)
    stream = traffic.stream(conversations=int(count / per_conversation) + 1, prefix=prefix, seed=5, templates=templates)
    stamped = (e.encode(day + timedelta(seconds=e.offset_s)) for e in stream[:count])
    return [parse(raw, max_event_bytes=_LIMIT, max_text_bytes=_LIMIT) for raw in stamped]


async def run(events: int, concurrent: int) -> dict[str, Any]:
    """Both passes over a fresh data dir; the figures of each."""
    folder = Path(tempfile.mkdtemp(prefix="vigil-skills-cpu-"))
    settings = Settings(_env_file=None, data_dir=folder, knowledge={"paths": [str(p) for p in KNOWLEDGE_PATHS]})
    day = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
    clock = ManualClock(day)
    parts = composed(settings, clock, CountingSink())
    ledger = Ledger()
    parts.skills[:] = [TimedSkill(skill, ledger) for skill in parts.skills]
    store = parts.store
    store.keep_with([TimedKeeper(keeper, ledger) for keeper in store._keepers])
    record = store.record

    async def timed_record(event: Event) -> Recorded:
        began = time.process_time()
        try:
            return await record(event)
        finally:
            ledger.add("recording", began)

    store.record = timed_record  # type: ignore[method-assign]
    await parts.start()
    try:
        pipeline = parts.pipeline()
        one_at_a_time = demo_events(events, "cpu", day)
        began, wall = time.process_time(), time.perf_counter()
        for event in one_at_a_time:
            clock.advance_to(event.occurred_at)
            await pipeline.handle(event, clock.monotonic())
        sequential = {"cpu_s": time.process_time() - began, "wall_s": time.perf_counter() - wall}
        steps = {"cpu_s": dict(ledger.cpu_s), "calls": dict(ledger.calls)}
        lanes: defaultdict[str, list[Event]] = defaultdict(list)
        for event in demo_events(events, "lane", day):
            lanes[event.conversation_id].append(event)
        queue = list(lanes.values())

        async def lane() -> None:
            while queue:
                for event in queue.pop():
                    await pipeline.handle(event, clock.monotonic())

        began, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(lane() for _ in range(concurrent)))
        together = {"cpu_s": time.process_time() - began, "wall_s": time.perf_counter() - wall}
    finally:
        await parts.close()
    kinds = Counter(getattr(e, "role", None) or e.type for e in one_at_a_time)
    return {"events": events, "kinds": dict(kinds), "sequential": sequential, "steps": steps, "concurrent": together}


def breakdown(figures: dict[str, Any]) -> list[tuple[str, float, int, float]]:
    """(step, CPU ms per event of the mix, calls, CPU ms per call), the keepers' time taken out of recording's,
    and the rest (the event's total less every step) last."""
    events = figures["events"]
    cpu = dict(figures["steps"]["cpu_s"])
    calls = figures["steps"]["calls"]
    kept = sum(v for k, v in cpu.items() if k.startswith("keeper:"))
    if "recording" in cpu:
        cpu["recording"] -= kept
    rows = [
        (step, seconds * 1000 / events, calls[step], seconds * 1000 / calls[step] if calls[step] else 0.0)
        for step, seconds in sorted(cpu.items(), key=lambda item: -item[1])
    ]
    rest = figures["sequential"]["cpu_s"] - sum(figures["steps"]["cpu_s"].values())
    rows.append(("the rest (gates, suggestions stored and published, pipeline)", rest * 1000 / events, events, 0.0))
    return rows


def table(figures: dict[str, Any], concurrent: int) -> str:
    events = figures["events"]
    seq, together = figures["sequential"], figures["concurrent"]
    lines = [
        f"{events} events of the demo mix ({', '.join(f'{k} {v}' for k, v in sorted(figures['kinds'].items()))}).",
        f"One at a time: {seq['cpu_s'] * 1000 / events:.2f} ms of CPU per event, {events / seq['wall_s']:.0f} "
        f"events/s; {concurrent} conversations at a time: {together['cpu_s'] * 1000 / events:.2f} ms per event, "
        f"{events / together['wall_s']:.0f} events/s.",
        "",
        "| step | CPU ms per event of the mix | calls | CPU ms per call |",
        "|---|---:|---:|---:|",
    ]
    for step, per_event, calls, per_call in breakdown(figures):
        called = f"{calls} | {per_call:.2f}" if step.startswith(("recording", "keeper:", "skill:")) else " | "
        lines.append(f"| {step} | {per_event:.2f} | {called} |")
    lines.append(f"| **every step, one at a time** | **{seq['cpu_s'] * 1000 / events:.2f}** | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.skills_cpu", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2_000, help="events of the demo mix (default 2,000)")
    parser.add_argument("--concurrent", type=int, default=64, help="conversations at once, second pass (64)")
    parser.add_argument("--json", type=Path, help="where to write the results (default bench/results/...)")
    args = parser.parse_args(argv)
    figures = asyncio.run(run(args.events, args.concurrent))
    print(table(figures, args.concurrent))
    output = report.save("skills_cpu", argv, {"events": args.events, "concurrent": args.concurrent}, figures, args.json)
    print(f"\nresults: {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
