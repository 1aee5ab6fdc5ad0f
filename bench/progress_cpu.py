"""What the progress capability costs each event (issue 24): vigil's CPU per event with progress on and off, in
process, on the same traffic.

The pipeline is ``vigil.testing.wired`` (every capability but answers, which needs the embedding model; a
``ManualClock``), fed on the in-process transport so that neither Kafka nor the benchmark's own producer shares the
measurement: CPU time of the whole process (every thread: the event loop and aiosqlite's) over the events handled,
divided by their number. Two traffics:

- ``analysts``: ``--events`` analyst messages over ``--conversations`` conversations, one in four a promise with a
  due time ("I'll call you back by 5pm ...");
- ``non-questions``: the ingest benchmark's mix of that name (``bench.traffic``): analyst, bot and system messages
  and case events of the demo conversations.

Progress's own cost is the difference between the two runs of a traffic. SQLite unless ``--database-url`` names
PostgreSQL.

Run: ``python -m bench.progress_cpu [--traffic analysts|non-questions] [--events 10000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench import traffic
from vigil.app.settings import Settings
from vigil.core.clock import ManualClock
from vigil.testing import wired
from vigil.wire.events import Event, parse

_LIMITS = {"max_event_bytes": 1 << 20, "max_text_bytes": 1 << 16}
_TEXTS = (
    "I've checked your account and reset the password, please try again.",
    "I'll call you back by 5pm with an update on the refund.",
    "Thanks for waiting, I have escalated this to our billing team.",
    "Could you confirm the order number for me please?",
)


def analysts(events: int, conversations: int, start: datetime) -> list[Event]:
    """Analyst messages, round-robin over the conversations, one second apart."""
    made = []
    for n in range(events):
        conversation = f"c-{n % conversations}"
        raw = {
            "type": "message",
            "schema_version": 1,
            "message_id": f"{conversation}-m{n}",
            "conversation_id": conversation,
            "tenant": "acme",
            "sent_at": (start + timedelta(seconds=n)).isoformat(),
            "role": "analyst",
            "text": _TEXTS[n % len(_TEXTS)],
        }
        made.append(parse(json.dumps(raw).encode(), **_LIMITS))
    return made


def non_questions(events: int, conversations: int, start: datetime) -> list[Event]:
    """The ingest benchmark's non-questions mix."""
    templates = traffic.mixed(traffic.load_templates(), "non-questions")
    stream = traffic.stream(conversations=conversations, prefix="conv", seed=1, templates=templates)[:events]
    return [parse(e.encode(start + timedelta(seconds=e.offset_s)), **_LIMITS) for e in stream]


async def cpu_per_event(events: list[Event], *, progress: bool, database_url: str | None) -> tuple[float, float]:
    """(CPU ms per event, events/s) for ``events`` through a fresh pipeline, progress on or off."""
    with tempfile.TemporaryDirectory() as directory:
        settings = Settings(
            _env_file=None,
            data_dir=Path(directory),
            database={"url": database_url},
            answers={"enabled": False},
            progress={"enabled": progress},
        )  # type: ignore[call-arg]
        async with wired(Path(directory), settings=settings, clock=ManualClock(events[0].occurred_at)) as vigil:
            wall, cpu = time.perf_counter(), time.process_time()
            await vigil.send(*events)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return cpu / len(events) * 1000, len(events) / wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.progress_cpu", description=__doc__.split("\n")[0])
    parser.add_argument("--traffic", choices=("analysts", "non-questions"), default="analysts")
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--conversations", type=int, help="default: 500 (analysts), 2,000 (non-questions)")
    parser.add_argument("--database-url", help="default: SQLite in a temporary directory")
    args = parser.parse_args(argv)
    start = datetime.now(UTC) - timedelta(days=1)
    if args.traffic == "analysts":
        events = analysts(args.events, args.conversations or 500, start)
    else:
        events = non_questions(args.events, args.conversations or 2000, start)
    on = asyncio.run(cpu_per_event(events, progress=True, database_url=args.database_url))
    off = asyncio.run(cpu_per_event(events, progress=False, database_url=args.database_url))
    print(f"{args.traffic}, {len(events):,} events")
    print(f"progress on:  {on[0]:.3f} ms CPU/event, {on[1]:,.0f} events/s")
    print(f"progress off: {off[0]:.3f} ms CPU/event, {off[1]:,.0f} events/s")
    print(f"progress:     {on[0] - off[0]:.3f} ms CPU/event")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
