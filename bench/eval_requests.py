"""Does a customer need something? The question detector on the team's labelled support chats.

    python -m bench.eval_requests [--split tune|test|all] [--errors N]

Labels: ``bench/data/requests-*.jsonl``: customer messages of four fictional companies' support chats (first
messages and follow-ups, several styles), each labelled ``needs`` (the analyst should answer or act) with a
``kind``, written before any rule was tuned on them. The set is split by conversation into a tune half (for looking
at errors while changing the detector) and a test half (reported, never tuned on); the split is a stable hash, so
it never changes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from vigil.answers.questions import classify

DATA = Path(__file__).resolve().parent / "data"
FIELDS = ("id", "company", "conversation", "position", "context", "text", "style", "needs", "kind")


@dataclass(frozen=True, slots=True)
class Labelled:
    id: str
    company: str
    conversation: str
    position: str
    context: str
    text: str
    style: str
    needs: bool
    kind: str


def split_of(conversation: str) -> str:
    """A conversation's half: its messages stay together, and the split never changes."""
    return "tune" if hashlib.sha256(conversation.encode()).digest()[0] % 2 == 0 else "test"


def load(folder: Path = DATA) -> list[Labelled]:
    """Every labelled message of ``folder``'s ``requests-*.jsonl``, checked.

    Raises:
        ValueError: a line lacks a field, or an id is repeated.
    """
    rows: list[Labelled] = []
    for path in sorted(folder.glob("requests-*.jsonl")):
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            if not line.strip():
                continue
            raw = json.loads(line)
            missing = [name for name in FIELDS if name not in raw]
            if missing:
                raise ValueError(f"{path.name}:{number}: missing {', '.join(missing)}")
            rows.append(Labelled(**{name: raw[name] for name in FIELDS}))
    ids = [row.id for row in rows]
    if len(set(ids)) != len(ids):
        raise ValueError("labelled ids repeat")
    return rows


@dataclass(frozen=True, slots=True)
class Scores:
    n: int
    precision: float
    recall: float
    f1: float
    accuracy: float


def scores(rows: Iterable[Labelled], detect: Callable[[str], bool]) -> Scores:
    """Precision and recall of ``detect`` at finding the messages that need something."""
    tp = fp = fn = tn = 0
    for row in rows:
        said = detect(row.text)
        tp += row.needs and said
        fp += not row.needs and said
        fn += row.needs and not said
        tn += not row.needs and not said
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    n = tp + fp + fn + tn
    return Scores(n, precision, recall, f1, (tp + tn) / n if n else 0.0)


def rules(text: str) -> bool:
    """The detector as it is: vigil's rules."""
    return classify(text).asks


def table(rows: list[Labelled], detect: Callable[[str], bool]) -> list[str]:
    lines = ["| subset | n | precision | recall | F1 | accuracy |", "|---|---:|---:|---:|---:|---:|"]
    groups: dict[str, list[Labelled]] = defaultdict(list)
    for row in rows:
        groups["all"].append(row)
        groups[f"{row.position} messages"].append(row)
        groups[f"company: {row.company}"].append(row)
        groups[f"style: {row.style}"].append(row)
    order = {"all": 0, "first messages": 1, "follow_up messages": 2}
    for name, subset in sorted(groups.items(), key=lambda item: (order.get(item[0], 3), item[0])):
        s = scores(subset, detect)
        lines.append(f"| {name} | {s.n} | {s.precision:.3f} | {s.recall:.3f} | {s.f1:.3f} | {s.accuracy:.3f} |")
    return lines


def recall_by_kind(rows: list[Labelled], detect: Callable[[str], bool]) -> list[str]:
    """How often the detector speaks, per kind: the share of ``needs`` kinds it finds, of the others it speaks on."""
    lines = ["| kind | needs | n | detector speaks |", "|---|---|---:|---:|"]
    kinds: dict[tuple[str, bool], list[Labelled]] = defaultdict(list)
    for row in rows:
        kinds[(row.kind, row.needs)].append(row)
    for (kind, needs), subset in sorted(kinds.items(), key=lambda item: (not item[0][1], item[0][0])):
        spoke = sum(detect(row.text) for row in subset)
        lines.append(f"| {kind} | {needs} | {len(subset)} | {spoke / len(subset):.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=["tune", "test", "all"], default="test")
    parser.add_argument("--errors", type=int, default=0, help="print this many misclassified tune messages")
    args = parser.parse_args()
    rows = load()
    chosen = [row for row in rows if args.split == "all" or split_of(row.conversation) == args.split]
    print(f"Split: {args.split} ({len(chosen)} of {len(rows)} messages)\n")
    print("\n".join(table(chosen, rules)), end="\n\n")
    print("\n".join(recall_by_kind(chosen, rules)))
    if args.errors:
        wrong = [r for r in rows if split_of(r.conversation) == "tune" and r.needs != rules(r.text)]
        for row in wrong[: args.errors]:
            verdict = classify(row.text)
            print(f"{'FN' if row.needs else 'FP'} {row.kind:18} {verdict.reason:20} {row.text[:140]!r}")


if __name__ == "__main__":
    main()
