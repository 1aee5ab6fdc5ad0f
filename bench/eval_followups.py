"""Follow-up questions in Brightwave conversations: which get answers, and which repeats vigil keeps quiet about.

    python -m bench.eval_followups [--split tune|test|all] [--analyst-delay S] [--overlap X] [--turns]

Data: ``bench/data/brightwave-followups.jsonl``, 41 conversations the team wrote (147 customer turns), each turn
marked ``answer`` (a new question with its own answer, and the entries that answer it), ``repeat`` or
``near_repeat`` (an earlier question of the conversation asked again) or ``none`` (nothing to answer). Each
conversation is replayed through the daemon's own composition and pipeline (``vigil.app.evaluation.composed``:
the real gates, SQLite, the bundled help centre ``knowledge/articles`` and ``knowledge/faqs`` imported, the real
embedding model) on a ``ManualClock``: the customer's first message, vigil's answer at once, the analyst's reply
``--analyst-delay`` seconds later (default 5), the customer's next message the turn's ``seconds_after_previous``
after that, and so on. What vigil published, or the reason it kept quiet, is read per turn.

The conversations are split into tune and test halves by a stable hash of their id (the same split as
``bench.eval_requests``); the near-repeat threshold was chosen on the tune half, and the test half is the one
reported in docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import shutil
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from prometheus_client import Counter as MetricCounter

from vigil.app.evaluation import composed
from vigil.app.settings import Settings
from vigil.core.clock import ManualClock
from vigil.transport.memory import MemorySink
from vigil.wire.events import Message

ROOT = Path(__file__).resolve().parent.parent
FOLLOWUPS = ROOT / "bench" / "data" / "brightwave-followups.jsonl"
HELP_CENTRE = [ROOT / "knowledge" / "articles", ROOT / "knowledge" / "faqs"]
START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
APART = timedelta(hours=1)  # conversations are replayed one after another, an hour apart
CONVERSATION_RULES = ("cooldown", "repeated_question", "repeated_source", "similar_to_earlier")
"""The silences that look at what was said before in the conversation (the cooldown is gone since issue 11)."""


def split_of(conversation: str) -> str:
    """A conversation's half: its turns stay together, and the split never changes."""
    return "tune" if hashlib.sha256(conversation.encode()).digest()[0] % 2 == 0 else "test"


@dataclass(frozen=True, slots=True)
class Turn:
    conversation: str
    turn: int
    text: str
    expect: str
    answer_ids: tuple[str, ...]
    published: bool
    source: str | None
    silence: str | None

    @property
    def right(self) -> bool:
        return self.published and self.source in self.answer_ids


def read_conversations(path: Path = FOLLOWUPS) -> dict[str, list[dict[str, Any]]]:
    conversations: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in path.read_text("utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            conversations[row["conversation"]].append(row)
    return {cid: sorted(rows, key=lambda r: r["turn"]) for cid, rows in conversations.items()}


def _message(conversation: str, number: int, at: datetime, role: str, text: str) -> Message:
    return Message(
        type="message",
        schema_version=1,
        message_id=f"{role[0]}{number}",
        conversation_id=conversation,
        sent_at=at,
        role=role,  # type: ignore[arg-type]
        text=text,
    )


def _silences(counter: MetricCounter) -> Counter[str]:
    counts: Counter[str] = Counter()
    for family in counter.collect():
        for sample in family.samples:
            if sample.name.endswith("_total"):
                counts[next(iter(sample.labels.values()))] = int(sample.value)
    return counts


async def replayed(
    conversations: dict[str, list[dict[str, Any]]], analyst_delay_s: float, answers: dict[str, Any] | None = None
) -> list[Turn]:
    """Every customer turn of ``conversations``, as the real pipeline handled it."""
    folder = Path(tempfile.mkdtemp(prefix="vigil-followups-"))
    sink = MemorySink()
    turns: list[Turn] = []
    try:
        settings = Settings(
            _env_file=None,
            data_dir=folder,
            answers={"enabled": True} | (answers or {}),
            knowledge={"paths": HELP_CENTRE},
        )
        clock = ManualClock(START)
        parts = composed(settings, clock, sink)
        await parts.start()
        try:
            pipeline = parts.pipeline()
            suppressed = parts.platform.metrics.suggestions_suppressed
            for index, (cid, rows) in enumerate(sorted(conversations.items())):
                at = START + APART * (index + 1)
                for row in rows:
                    if row["analyst_before"]:
                        at += timedelta(seconds=analyst_delay_s)
                        clock.advance_to(at)
                        analyst = _message(cid, row["turn"], at, "analyst", row["analyst_before"])
                        await pipeline.handle(analyst, clock.monotonic())
                    at += timedelta(seconds=row["seconds_after_previous"])
                    clock.advance_to(at)
                    before, said = _silences(suppressed), len(sink.published)
                    await pipeline.handle(_message(cid, row["turn"], at, "customer", row["text"]), clock.monotonic())
                    new = [s for s in sink.published[said:] if s.kind == "answer"]
                    quiet = _silences(suppressed) - before
                    turns.append(
                        Turn(
                            conversation=cid,
                            turn=row["turn"],
                            text=row["text"],
                            expect=row["expect"],
                            answer_ids=tuple(row["answer_ids"]),
                            published=bool(new),
                            source=new[0].sources[0].id if new and new[0].sources else None,
                            silence=None if new else next(iter(quiet), "nothing_proposed"),
                        )
                    )
        finally:
            await parts.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return turns


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({part / whole:.2f})" if whole else "-"


def report(turns: Iterable[Turn]) -> list[str]:
    turns = list(turns)
    asked = [t for t in turns if t.expect == "answer"]
    repeats = [t for t in turns if t.expect in ("repeat", "near_repeat")]
    nothing = [t for t in turns if t.expect == "none"]
    answered = [t for t in asked if t.published]
    held_back = [t for t in asked if t.silence in CONVERSATION_RULES]
    wrong = [t for t in turns if t.published and t.expect != "none" and not t.right]
    lines = [
        f"- follow-up questions answered: {_share(len(answered), len(asked))}, "
        f"with a right source: {_share(sum(t.right for t in asked), len(asked))}",
        f"- follow-up questions silenced by a conversation rule ({', '.join(CONVERSATION_RULES)}): "
        f"{_share(len(held_back), len(asked))}",
        f"- repeats and near-repeats kept quiet: {_share(sum(not t.published for t in repeats), len(repeats))} "
        f"({_listed(Counter(t.silence for t in repeats if t.silence))})",
        f"- nothing to answer, kept quiet: {_share(sum(not t.published for t in nothing), len(nothing))}",
        f"- answers from a wrong source: {len(wrong)} of {sum(t.published for t in turns)} published",
        f"- why follow-up questions went unanswered: {_listed(Counter(t.silence for t in asked if t.silence))}",
    ]
    return lines


def _listed(counts: Counter[str | None]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.most_common()) or "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("tune", "test", "all"), default="test")
    parser.add_argument("--analyst-delay", type=float, default=5.0, help="seconds from vigil's answer to the analyst's")
    parser.add_argument("--turns", action="store_true", help="print every turn's outcome")
    parser.add_argument(
        "--overlap", type=float, default=None, help="VIGIL_ANSWERS__MAX_QUESTION_OVERLAP (default: vigil's default)"
    )
    args = parser.parse_args()
    conversations = {
        cid: rows for cid, rows in read_conversations().items() if args.split == "all" or split_of(cid) == args.split
    }
    answers = {} if args.overlap is None else {"max_question_overlap": args.overlap}
    turns = asyncio.run(replayed(conversations, args.analyst_delay, answers))
    if args.turns:
        for t in turns:
            outcome = f"answered from {t.source}" if t.published else f"quiet: {t.silence}"
            mark = "ok" if (t.right if t.expect == "answer" else not t.published) else "XX"
            print(f"{mark} {t.conversation} {t.turn} {t.expect:11} {outcome:55} | {t.text}")
    print(f"{args.split}: {len(conversations)} conversations, {len(turns)} customer turns")
    print("\n".join(report(turns)))


if __name__ == "__main__":
    main()
