"""Score a replay of #ubuntu IRC threads: did vigil suggest what the helper then said?

Reads the events that ``ubuntu_irc.py`` wrote and the suggestions that ``vigil eval replay`` wrote for them.

- **A question** is a customer message that a helper's message answers: the data's ``reply_to`` link (kept in the
  message's ``metadata``, naming the later line ``FILE:LINE`` that replies) points at a message of the same
  conversation whose role is ``analyst``. Lines a bot answered are not questions.
- **Its window** holds vigil's ``answer`` suggestions in that conversation made after the question and before the
  helper's answer: those replying (``in_reply_to``) to the question or to any message after it and before the
  answer, in the order of the events file (lines of one minute share a timestamp, so time alone cannot order them).
- **A hit**: a suggestion of the window matches the helper's answer (``irc_match``). **Silent**: the window is empty.
- **Precision**: of the suggestions that fall in some question's window, the share that match an answer they came
  before. Suggestions outside every window (a customer line no helper answered) cannot be judged and are only
  counted.

Only the questions and suggestions of conversations that began within ``--since``/``--until`` are scored: the
tune period (threads up to 2009-12-31) chose the match's threshold, so a result is reported on the test period
(``--since 2010-01-01``) alone. Over time: the period's conversations in date order, by buckets of ``--bucket``
threads.

    python -m eval.irc_score EVENTS SUGGESTIONS --since 2010-01-01 [--bucket 500] [--json OUT] [--show 10]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from eval.irc_match import THRESHOLD, Matcher, Pair
from vigil.knowledge.embedding import Embedder
from vigil.knowledge.onnx_embedding import OnnxEmbedder

TEST_SINCE = date(2010, 1, 1)
"""The first day of the test period: threads from this day on are reported; older ones were tuned on."""


@dataclass(frozen=True, slots=True)
class Line:
    """A message of the events file, at its place in the file."""

    position: int
    message_id: str
    conversation_id: str
    role: str
    text: str
    sent_at: datetime
    answered_by: str | None
    """The id of the later message that replies to this one, from the data's ``reply_to``."""


@dataclass(frozen=True, slots=True)
class Question:
    """A customer line a helper answered, and the suggestions vigil made in between."""

    asked: Line
    answer: Line
    suggestions: tuple[dict[str, Any], ...]


@dataclass
class Replay:
    """The events file read for scoring: its messages by id and its conversations in order of their first line."""

    lines: dict[str, Line] = field(default_factory=dict)
    conversations: dict[str, list[Line]] = field(default_factory=dict)

    def day(self, conversation_id: str) -> date:
        """The day a conversation began (its first message's)."""
        return self.conversations[conversation_id][0].sent_at.date()


def read_replay(path: Path) -> Replay:
    """The messages of an events file (case and feedback events are skipped)."""
    replay = Replay()
    for position, event in enumerate(_json_lines(path)):
        if event.get("type") != "message":
            continue
        metadata = event.get("metadata") or {}
        reply = metadata.get("reply_to")
        line = Line(
            position=position,
            message_id=event["message_id"],
            conversation_id=event["conversation_id"],
            role=event["role"],
            text=event["text"],
            sent_at=datetime.fromisoformat(event["sent_at"].replace("Z", "+00:00")),
            answered_by=f"{metadata['file']}:{reply}" if reply is not None and "file" in metadata else None,
        )
        replay.lines[line.message_id] = line
        replay.conversations.setdefault(line.conversation_id, []).append(line)
    return replay


def questions(replay: Replay, suggestions: Iterable[dict[str, Any]]) -> list[Question]:
    """Every question a helper answered, in file order, with the answer suggestions of its window."""
    placed: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for suggestion in suggestions:
        asked = replay.lines.get(suggestion.get("in_reply_to") or "")
        if suggestion.get("kind") == "answer" and asked is not None:
            placed.setdefault(asked.conversation_id, []).append((asked.position, suggestion))
    found = []
    for line in sorted(replay.lines.values(), key=lambda line: line.position):
        answer = replay.lines.get(line.answered_by or "")
        if (
            line.role != "customer"
            or answer is None
            or answer.role != "analyst"
            or answer.conversation_id != line.conversation_id
        ):
            continue
        window = tuple(s for at, s in placed.get(line.conversation_id, []) if line.position <= at < answer.position)
        found.append(Question(asked=line, answer=answer, suggestions=window))
    return found


@dataclass(frozen=True, slots=True)
class Verdict:
    """A question scored: whether vigil spoke in its window, and whether a suggestion matched the answer."""

    question: Question
    spoke: bool
    hit: bool
    matched: tuple[str, ...]
    """The ids of the window's suggestions that match the answer."""


def judge(found: Sequence[Question], matcher: Matcher) -> list[Verdict]:
    """Each question's verdict; every (suggestion, answer) pair is scored in one batch."""
    pairs = [
        (q, s, Pair(suggestion=s["text"], answer=q.answer.text, question=q.asked.text))
        for q in found
        for s in q.suggestions
    ]
    verdicts = matcher.matches([pair for _, _, pair in pairs])
    matched: dict[int, list[str]] = {}
    for (q, s, _), verdict in zip(pairs, verdicts, strict=True):
        if verdict:
            matched.setdefault(id(q), []).append(s["suggestion_id"])
    return [
        Verdict(question=q, spoke=bool(q.suggestions), hit=id(q) in matched, matched=tuple(matched.get(id(q), ())))
        for q in found
    ]


@dataclass(frozen=True, slots=True)
class Tally:
    """The figures of a set of verdicts, with the suggestions made in the same conversations."""

    threads: int
    questions: int
    spoke: int
    hits: int
    suggestions: int
    judged: int
    matched: int
    first: str | None = None
    last: str | None = None

    def as_dict(self) -> dict[str, Any]:
        low, high = wilson(self.hits, self.questions)
        return {
            "threads": self.threads,
            "first_day": self.first,
            "last_day": self.last,
            "questions": self.questions,
            "suggestions": self.suggestions,
            "suggestions_judged": self.judged,
            "suggestions_matched": self.matched,
            "spoke": self.spoke,
            "hits": self.hits,
            "hit_rate": _ratio(self.hits, self.questions),
            "hit_rate_95": [round(low, 4), round(high, 4)],
            "silence_rate": _ratio(self.questions - self.spoke, self.questions),
            "hit_rate_when_spoken": _ratio(self.hits, self.spoke),
            "precision": _ratio(self.matched, self.judged),
        }


def tally(
    verdicts: Sequence[Verdict], suggestions: Sequence[dict[str, Any]], conversations: Sequence[str], replay: Replay
) -> Tally:
    """The figures of ``verdicts`` and ``suggestions`` (both already within ``conversations``)."""
    judged = {s["suggestion_id"] for v in verdicts for s in v.question.suggestions}
    matched = {sid for v in verdicts for sid in v.matched}
    days = sorted(replay.day(c) for c in conversations)
    return Tally(
        threads=len(conversations),
        questions=len(verdicts),
        spoke=sum(v.spoke for v in verdicts),
        hits=sum(v.hit for v in verdicts),
        suggestions=len(suggestions),
        judged=len(judged),
        matched=len(matched),
        first=days[0].isoformat() if days else None,
        last=days[-1].isoformat() if days else None,
    )


def wilson(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a rate (95% by default): honest for small counts and rates near 0."""
    if not trials:
        return 0.0, 0.0
    rate = successes / trials
    centre = (rate + z * z / (2 * trials)) / (1 + z * z / trials)
    spread = z * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return max(0.0, centre - spread), min(1.0, centre + spread)


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def score(
    replay: Replay,
    suggestions: Sequence[dict[str, Any]],
    matcher: Matcher,
    *,
    since: date | None = None,
    until: date | None = None,
    bucket: int = 500,
) -> dict[str, Any]:
    """The whole period's figures and, over time, those of each bucket of ``bucket`` threads in date order."""
    chosen = [
        c
        for c in sorted(replay.conversations, key=lambda c: replay.conversations[c][0].position)
        if (since is None or replay.day(c) >= since) and (until is None or replay.day(c) <= until)
    ]
    kept = set(chosen)
    answers = [s for s in suggestions if s.get("kind") == "answer" and s.get("conversation_id") in kept]
    verdicts = judge([q for q in questions(replay, answers) if q.asked.conversation_id in kept], matcher)
    buckets = []
    for start in range(0, len(chosen), bucket):
        part = set(chosen[start : start + bucket])
        buckets.append(
            tally(
                [v for v in verdicts if v.question.asked.conversation_id in part],
                [s for s in answers if s["conversation_id"] in part],
                chosen[start : start + bucket],
                replay,
            ).as_dict()
        )
    return {
        "since": since.isoformat() if since else None,
        "until": until.isoformat() if until else None,
        "threshold": matcher.threshold,
        "total": tally(verdicts, answers, chosen, replay).as_dict(),
        "bucket_threads": bucket,
        "over_time": buckets,
        "matches": [_shown(v, s) for v in verdicts for s in v.question.suggestions if s["suggestion_id"] in v.matched],
    }


def _shown(verdict: Verdict, suggestion: dict[str, Any]) -> dict[str, Any]:
    return {
        "question": verdict.question.asked.message_id,
        "question_text": verdict.question.asked.text,
        "answer_text": verdict.question.answer.text,
        "suggestion_id": suggestion["suggestion_id"],
        "suggestion_text": suggestion["text"],
        "sources": [f"{s.get('kind')}:{s.get('id')}" for s in suggestion.get("sources", [])],
    }


def table(result: dict[str, Any]) -> str:
    """The figures as a Markdown table: the period's total first, then each bucket."""
    head = (
        "| threads | days | questions | suggestions | spoke | hits | hit rate (95%) | silence | precision |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    rows = [_row("all", result["total"]), *(_row(f"{i + 1}", b) for i, b in enumerate(result["over_time"]))]
    return "\n".join([head, *rows])


def _row(name: str, t: dict[str, Any]) -> str:
    low, high = t["hit_rate_95"]
    return (
        f"| {name}: {t['threads']} | {t['first_day']} to {t['last_day']} | {t['questions']} | {t['suggestions']} | "
        f"{t['spoke']} | {t['hits']} | {_pct(t['hit_rate'])} ({100 * low:.1f} to {100 * high:.1f}) | "
        f"{_pct(t['silence_rate'])} | {_pct(t['precision'])} |"
    )


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _json_lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def run(argv: list[str] | None = None, *, embedder: Embedder | None = None) -> dict[str, Any]:
    """Parse the arguments, score, print the table (and the first matches with --show), write --json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("events", type=Path, help="the events file replayed (eval/ubuntu_irc.py's output)")
    parser.add_argument("suggestions", type=Path, help="what `vigil eval replay EVENTS --out FILE` wrote")
    parser.add_argument("--since", type=date.fromisoformat, help="score threads begun on or after (YYYY-MM-DD)")
    parser.add_argument("--until", type=date.fromisoformat, help="score threads begun on or before (YYYY-MM-DD)")
    parser.add_argument("--bucket", type=int, default=500, help="threads per bucket over time (default 500)")
    parser.add_argument("--threshold", type=float, default=THRESHOLD, help=f"the match's (default {THRESHOLD})")
    parser.add_argument("--json", type=Path, help="also write the figures (and every match) here")
    parser.add_argument("--show", type=int, default=0, help="print the first N matches")
    args = parser.parse_args(argv)
    if embedder is None:
        embedder = OnnxEmbedder()
        embedder.load()
    result = score(
        read_replay(args.events),
        list(_json_lines(args.suggestions)),
        Matcher(embedder, args.threshold),
        since=args.since,
        until=args.until,
        bucket=args.bucket,
    )
    print(table(result))
    for shown in result["matches"][: args.show]:
        print(f"\n{shown['question']}: {shown['question_text']}\n  helper: {shown['answer_text']}")
        print(f"  vigil ({', '.join(shown['sources'])}): {shown['suggestion_text'][:300]}")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return result


def main(argv: list[str] | None = None) -> int:
    """``python -m eval.irc_score``."""
    run(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
