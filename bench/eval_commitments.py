"""Commitment extraction, follow-ups and customer pressure (issue 13), scored on the team's labelled sets.

    python -m bench.eval_commitments --split dev|test|all [--errors]
    python -m bench.eval_commitments --set shapes --split dev|test|all [--errors]   # commitments-shapes.jsonl
    python -m bench.eval_commitments --set heldout --split all [--errors]   # commitments-heldout.jsonl: all test
    python -m bench.eval_commitments --set heldout-2 --split all [--errors]   # commitments-heldout-2.jsonl: all test
    python -m bench.eval_commitments --set follow-ups --split dev|test|all [--errors]
    python -m bench.eval_commitments --set pressure --split dev|test|all [--errors]

Data: ``bench/data/commitments.jsonl`` (225 messages), ``follow-ups-kept.jsonl`` (66 pairs) and ``pressure.jsonl``
(44 sequences); bench/data/README.md says how each was written. Each row is in ``dev`` when the sha1 of its id is
even, else in ``test``; rules were tuned on dev only.

Commitments: ``find_promises`` runs on every analyst message, with the message's zone or else the tenant's.
Customer messages are the role rule's: the caller never passes them, so they predict nothing (and the count of
promises the text alone would have given on them is printed as a check). Predicted promises are matched to the gold
ones of the same message, first by span overlap (each gold span to the first unmatched predicted span that overlaps
it), then the rest by order (the i-th unmatched prediction with the i-th unmatched gold promise): a promise found
with a span that misses the gold words still counts, and the count matched by order is printed. Precision and recall
are over promises; the due time of a matched pair is right when both are None or both are within 60 s.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

DATA = Path(__file__).resolve().parent / "data"
TENANT_ZONES = {
    "brightwave": "Europe/London",
    "copperleaf": "America/New_York",
    "southerly": "Australia/Sydney",
    "fernway": "Europe/London",
    "wattlebird": "Australia/Melbourne",
    "lindenhof": "Europe/Berlin",
    "oakhollow": "America/Chicago",
    "harrowgate": "Europe/London",
    "kowhai": "Pacific/Auckland",
    "maplecrest": "America/Toronto",
    "valdera": "Europe/Madrid",
    "tidewater": "Europe/Dublin",
    "saltmarsh": "Europe/London",
    "ironbark": "Australia/Sydney",
    "prairieline": "America/Denver",
}
DUE_TOLERANCE_S = 60.0


def split_of(row_id: str) -> str:
    """``dev`` or ``test``: a stable hash of the id, fixed before any extractor existed."""
    return "dev" if int(hashlib.sha1(row_id.encode()).hexdigest(), 16) % 2 == 0 else "test"


def load(name: str, split: str) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]
    return [row for row in rows if split == "all" or split_of(row["id"]) == split]


@dataclass(frozen=True, slots=True)
class Span:
    """A promise as scored: where it is in the text and when it is due."""

    start: int
    end: int
    due_at: datetime | None


@dataclass(slots=True)
class Score:
    """Counts over promises: found (true positives), spurious, missed; due times right of those found."""

    found: int = 0
    spurious: int = 0
    missed: int = 0
    due_right: int = 0
    by_order: int = 0
    messages: int = 0

    def add(self, other: Score) -> None:
        for name in ("found", "spurious", "missed", "due_right", "by_order", "messages"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def precision(self) -> float:
        return self.found / (self.found + self.spurious) if self.found + self.spurious else 1.0

    @property
    def recall(self) -> float:
        return self.found / (self.found + self.missed) if self.found + self.missed else 1.0

    @property
    def due_accuracy(self) -> float:
        return self.due_right / self.found if self.found else 1.0


def due_agrees(predicted: datetime | None, gold: datetime | None) -> bool:
    """Both None, or both given and within a minute of each other."""
    if predicted is None or gold is None:
        return predicted is None and gold is None
    return abs((predicted - gold).total_seconds()) <= DUE_TOLERANCE_S


def match(predicted: Sequence[Span], gold: Sequence[Span]) -> list[tuple[Span, Span, bool]]:
    """Pairs (predicted, gold, by_order): by span overlap first, then the unmatched ones by order."""
    pairs: list[tuple[Span, Span, bool]] = []
    free = list(predicted)
    unmatched_gold = []
    for g in gold:
        hit = next((p for p in free if p.start < g.end and g.start < p.end), None)
        if hit is None:
            unmatched_gold.append(g)
        else:
            free.remove(hit)
            pairs.append((hit, g, False))
    pairs.extend((p, g, True) for p, g in zip(free, unmatched_gold, strict=False))
    return pairs


def score_message(predicted: Sequence[Span], gold: Sequence[Span]) -> Score:
    pairs = match(predicted, gold)
    return Score(
        found=len(pairs),
        spurious=len(predicted) - len(pairs),
        missed=len(gold) - len(pairs),
        due_right=sum(due_agrees(p.due_at, g.due_at) for p, g, _ in pairs),
        by_order=sum(by_order for *_, by_order in pairs),
        messages=1,
    )


def _instant(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text).astimezone(UTC)


def gold_spans(row: dict[str, Any]) -> list[Span]:
    spans = []
    for c in row["commitments"]:
        start = row["text"].index(c["span"])
        spans.append(Span(start, start + len(c["span"]), _instant(c["due_at"])))
    return spans


def commitments(split: str, errors: bool, name: str = "commitments.jsonl") -> None:
    from vigil.progress.commitments import find_promises

    rows = load(name, split)
    total, by_tag = Score(), defaultdict(Score)
    ms: list[float] = []
    customer_text_alone = 0
    cold_start = time.perf_counter()
    find_promises("I'll call you on 21 May.", sent_at=datetime(2026, 1, 1, tzinfo=UTC), zone=ZoneInfo("UTC"))
    cold_ms = (time.perf_counter() - cold_start) * 1000
    for row in rows:
        zone = ZoneInfo(row["timezone"] or TENANT_ZONES[row["tenant"]])
        sent_at = _instant(row["sent_at"])
        assert sent_at is not None
        began = time.perf_counter()
        found = find_promises(row["text"], sent_at=sent_at, zone=zone)
        ms.append((time.perf_counter() - began) * 1000)
        if row["role"] == "customer":
            customer_text_alone += len(found)
            found = []  # the role rule: the caller passes analyst messages only
        predicted = [Span(p.start, p.end, p.due_at) for p in found]
        score = score_message(predicted, gold_spans(row))
        total.add(score)
        for tag in [*row["tags"], row["role"]]:
            by_tag[tag].add(score)
        if errors and (score.spurious or score.missed or score.due_right < score.found):
            print(f"\n{row['id']} {row['sent_at']} {row['timezone']} {row['tags']}\n  {row['text']}")
            for c in row["commitments"]:
                print(f"  gold {c['due_at']}  {c['span']!r}")
            for p in found:
                due = p.due_at.isoformat() if p.due_at else None
                print(f"  pred {due}  {row['text'][p.start : p.end]!r}  what={p.what!r}")
    analysts = sum(row["role"] == "analyst" for row in rows)
    print(
        f"commitments, split {split}: {len(rows)} messages ({analysts} analyst), {total.found + total.missed} promises"
    )
    print(
        f"  precision {total.precision:.3f}  recall {total.recall:.3f}  "
        f"(found {total.found}, spurious {total.spurious}, missed {total.missed}; {total.by_order} matched by order)"
    )
    print(
        f"  due time right (|pred-gold| <= 60 s, or both None): {total.due_right}/{total.found}"
        f" = {total.due_accuracy:.3f}"
    )
    print(f"  customer messages: 0 predicted by the role rule; the text alone would give {customer_text_alone}")
    print(f"  ms per message: median {statistics.median(ms):.2f}, max {max(ms):.2f}; first call (cold) {cold_ms:.0f}")
    print(f"  {'tag':24} {'msgs':>5} {'P':>6} {'R':>6} {'due':>9}")
    for tag, s in sorted(by_tag.items()):
        print(f"  {tag:24} {s.messages:5d} {s.precision:6.2f} {s.recall:6.2f} {s.due_right:4d}/{s.found:<4d}")


@dataclass(slots=True)
class Binary:
    """A yes/no rule's counts."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0
    wrong: list[str] = field(default_factory=list)

    def add(self, predicted: bool, gold: bool, label: str) -> None:
        if predicted and gold:
            self.tp += 1
        elif predicted:
            self.fp += 1
        elif gold:
            self.fn += 1
        else:
            self.tn += 1
        if predicted != gold:
            self.wrong.append(f"{'FP' if predicted else 'FN'} {label}")

    def line(self) -> str:
        p = self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0
        r = self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0
        return f"precision {p:.3f}  recall {r:.3f}  (tp {self.tp}, fp {self.fp}, fn {self.fn}, tn {self.tn})"


def binary(name: str, rows: Iterable[dict[str, Any]], rule: Callable[[dict[str, Any]], bool], gold: str) -> Binary:
    counts = Binary()
    for row in rows:
        counts.add(rule(row), bool(row[gold]), f"{row['id']}: {json.dumps(row, ensure_ascii=False)}")
    return counts


def follow_ups(split: str, errors: bool) -> None:
    from vigil.progress.commitments import follows_up

    rows = load("follow-ups-kept.jsonl", split)
    counts = binary("follow-ups", rows, lambda row: follows_up(row["promise"], row["text"]), "kept")
    print(f"follows_up, split {split}: {len(rows)} pairs\n  {counts.line()}")
    if errors:
        print("\n".join(counts.wrong))


def pressure(split: str, errors: bool) -> None:
    from vigil.progress.pressure import pressure as measure

    rows = load("pressure.jsonl", split)
    counts = binary("pressure", rows, lambda row: measure(row["customer_texts"]).escalate, "escalate")
    print(f"pressure (escalate), split {split}: {len(rows)} sequences\n  {counts.line()}")
    if errors:
        for line in counts.wrong:
            row_id = line.split(":")[0].split()[1]
            texts = next(r["customer_texts"] for r in rows if r["id"] == row_id)
            print(line.split(":")[0], measure(texts))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--set",
        choices=["commitments", "shapes", "heldout", "heldout-2", "follow-ups", "pressure"],
        default="commitments",
    )
    parser.add_argument("--split", choices=["dev", "test", "all"], default="dev")
    parser.add_argument("--errors", action="store_true", help="print each message scored wrong")
    args = parser.parse_args(argv)
    run = {
        "commitments": commitments,
        "shapes": partial(commitments, name="commitments-shapes.jsonl"),
        "heldout": partial(commitments, name="commitments-heldout.jsonl"),
        "heldout-2": partial(commitments, name="commitments-heldout-2.jsonl"),
        "follow-ups": follow_ups,
        "pressure": pressure,
    }[args.set]
    run(args.split, args.errors)


if __name__ == "__main__":
    main()
