"""Question detection on real support chats: precision and recall against human labels.

    python -m bench.eval_questions [--split dev|test|all] [--errors N]

Labels: ``bench/data/question-labels.jsonl`` (500 customer messages from #ubuntu IRC, labelled by hand, blind to
the detector); texts are read from ``../shared/data/ubuntu-irc``. The labels are split by thread into a dev half
(for looking at errors while writing the rules) and a test half (reported, never tuned on).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from bench.knowledge_env import SHARED
from vigil.cases.questions import classify

ROOT = Path(__file__).resolve().parent.parent
LABELS = ROOT / "bench" / "data" / "question-labels.jsonl"
THREADS = SHARED / "ubuntu-irc" / "threads-train.jsonl.gz"


@dataclass(frozen=True)
class Labelled:
    thread_id: str
    text: str
    asks: bool
    unsure: bool
    first: bool


def split_of(thread_id: str) -> str:
    """A thread's half: a stable hash, so the split never changes."""
    return "dev" if hashlib.sha256(thread_id.encode()).digest()[0] % 2 == 0 else "test"


def load(path: Path = LABELS, threads: Path = THREADS) -> list[Labelled]:
    labels = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    wanted = {(row["thread_id"], row["line"]) for row in labels}
    texts: dict[tuple[str, int], str] = {}
    with gzip.open(threads, "rt", encoding="utf-8") as handle:
        for line in handle:
            thread = json.loads(line)
            for message in thread["messages"]:
                key = (thread["thread_id"], message["line"])
                if key in wanted:
                    texts[key] = message["text"]
    return [
        Labelled(r["thread_id"], texts[(r["thread_id"], r["line"])], r["asks"], r["unsure"], r["first_in_thread"])
        for r in labels
    ]


def scores(rows: list[Labelled]) -> dict[str, float]:
    tp = sum(1 for r in rows if r.asks and classify(r.text).asks)
    fp = sum(1 for r in rows if not r.asks and classify(r.text).asks)
    fn = sum(1 for r in rows if r.asks and not classify(r.text).asks)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "n": len(rows),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "accuracy": sum(1 for r in rows if r.asks == classify(r.text).asks) / len(rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=["dev", "test", "all"], default="test")
    parser.add_argument("--errors", type=int, default=0, help="print this many misclassified dev messages")
    args = parser.parse_args()
    rows = load()
    chosen = [r for r in rows if args.split == "all" or split_of(r.thread_id) == args.split]
    print(f"| subset ({args.split}) | n | precision | recall | F1 | accuracy |\n|---|---:|---:|---:|---:|---:|")
    for name, subset in (
        ("all", chosen),
        ("sure labels only", [r for r in chosen if not r.unsure]),
        ("first message of a thread", [r for r in chosen if r.first]),
        ("later messages", [r for r in chosen if not r.first]),
    ):
        s = scores(subset)
        print(f"| {name} | {s['n']} | {s['precision']:.3f} | {s['recall']:.3f} | {s['f1']:.3f} | {s['accuracy']:.3f} |")
    if args.errors:
        wrong = [r for r in rows if split_of(r.thread_id) == "dev" and r.asks != classify(r.text).asks]
        for r in wrong[: args.errors]:
            print(f"{'FN' if r.asks else 'FP'} {classify(r.text).reason:20} {r.text[:150]!r}")


if __name__ == "__main__":
    main()
