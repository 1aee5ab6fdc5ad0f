"""How well ``irc_match`` agrees with people, and its threshold: on hand-labelled pairs of the tune period.

``bench/data/irc-match-labels.jsonl`` holds (question, suggestion, helper's answer) triples of the tune period
(threads up to 2009-12-31), each labelled by hand: does the suggestion say what the helper said? The file holds
ids (``FILE:LINE`` of ``../shared/data/ubuntu-irc``), and a suggestion's text only where it is the team's own (the
Brightwave help centre's); see ``bench/data/README.md`` for the sampling and the guideline.

The threshold is the one whose verdicts (``Matcher.judge``: the cosine and the shared words) have the best F1
against all the labels. Its agreement is measured out of fold: the pairs
are split by thread into five folds, each fold is judged with the threshold chosen on the other four, and the
verdicts are compared with the labels (precision, recall, F1, Cohen's kappa).

    python -m eval.irc_agreement [--labels bench/data/irc-match-labels.jsonl] [--threads PATH] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from eval.irc_match import Matcher, Pair, judge
from eval.ubuntu_irc import ROOT, THREADS, read_threads
from vigil.knowledge.onnx_embedding import OnnxEmbedder

LABELS = ROOT / "bench" / "data" / "irc-match-labels.jsonl"
FOLDS = 5
GRID = tuple(round(0.30 + step / 100, 2) for step in range(61))
"""The thresholds tried: 0.30 to 0.90 by 0.01."""


@dataclass(frozen=True, slots=True)
class Labelled:
    """One hand-labelled pair: its texts, the label, and where it came from."""

    pair: Pair
    match: bool
    unsure: bool
    stratum: str
    thread: str


@dataclass(frozen=True, slots=True)
class Agreement:
    """Verdicts against labels: the confusion counts and what they make."""

    n: int
    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def f1(self) -> float:
        total = self.precision + self.recall
        return 2 * self.precision * self.recall / total if total else 0.0

    @property
    def accuracy(self) -> float:
        return (self.tp + self.tn) / self.n if self.n else 0.0

    @property
    def kappa(self) -> float:
        """Cohen's kappa: agreement beyond what the two sides' rates of "yes" would give by chance."""
        if not self.n:
            return 0.0
        said, labelled = (self.tp + self.fp) / self.n, (self.tp + self.fn) / self.n
        chance = said * labelled + (1 - said) * (1 - labelled)
        return (self.accuracy - chance) / (1 - chance) if chance < 1 else 0.0

    def as_dict(self) -> dict[str, Any]:
        figures = ("precision", "recall", "f1", "accuracy", "kappa")
        return asdict(self) | {name: round(getattr(self, name), 3) for name in figures}


def agreement(verdicts: Sequence[bool], labels: Sequence[bool]) -> Agreement:
    """How ``verdicts`` agree with ``labels`` (the same pairs, in the same order)."""
    pairs = list(zip(verdicts, labels, strict=True))
    return Agreement(
        n=len(pairs),
        tp=sum(v and y for v, y in pairs),
        fp=sum(v and not y for v, y in pairs),
        fn=sum(y and not v for v, y in pairs),
        tn=sum(not v and not y for v, y in pairs),
    )


def verdicts(labelled: Sequence[Labelled], scores: Sequence[float], threshold: float) -> list[bool]:
    """The match's verdict on each pair at ``threshold``."""
    return [judge(item.pair, score, threshold) for item, score in zip(labelled, scores, strict=True)]


def best_threshold(labelled: Sequence[Labelled], scores: Sequence[float], grid: Sequence[float] = GRID) -> float:
    """The threshold of ``grid`` whose verdicts have the best F1 against the labels (ties: the lowest)."""
    labels = [item.match for item in labelled]
    return max(grid, key=lambda t: (agreement(verdicts(labelled, scores, t), labels).f1, -t))


def fold_of(thread: str) -> int:
    """A thread's fold: a stable hash, so a thread's pairs are never split between choosing and judging."""
    return zlib.crc32(thread.encode()) % FOLDS


def out_of_fold(labelled: Sequence[Labelled], scores: Sequence[float]) -> tuple[list[bool], list[float]]:
    """Each pair judged with the threshold chosen on the other folds; and the threshold each fold chose."""
    judged = [False] * len(labelled)
    chosen = []
    for fold in range(FOLDS):
        rest = [i for i, item in enumerate(labelled) if fold_of(item.thread) != fold]
        threshold = best_threshold([labelled[i] for i in rest], [scores[i] for i in rest])
        chosen.append(threshold)
        held = [i for i, item in enumerate(labelled) if fold_of(item.thread) == fold]
        said = verdicts([labelled[i] for i in held], [scores[i] for i in held], threshold)
        for i, verdict in zip(held, said, strict=True):
            judged[i] = verdict
    return judged, chosen


def read_labelled(labels: Path, threads: Path) -> list[Labelled]:
    """The labelled pairs with their texts, read from the threads file by ``FILE:LINE`` id."""
    texts: dict[str, str] = {}
    thread_of: dict[str, str] = {}
    for thread in read_threads(threads):
        for message in thread["messages"]:
            key = f"{thread['file']}:{message['line']}"
            texts[key] = message["text"].strip()
            thread_of[key] = thread["thread_id"]
    out = []
    with labels.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            row = json.loads(line)
            suggestion = row.get("suggestion_text") or "\n".join(texts[key] for key in row["suggestion_lines"])[:600]
            out.append(
                Labelled(
                    pair=Pair(suggestion=suggestion, answer=texts[row["answer"]], question=texts[row["question"]]),
                    match=row["match"],
                    unsure=row["unsure"],
                    stratum=row["stratum"],
                    thread=thread_of[row["question"]],
                )
            )
    return out


def report(labelled: Sequence[Labelled], scores: Sequence[float]) -> dict[str, Any]:
    """The chosen threshold and its agreement: out of fold, in sample, on sure labels, and by stratum."""
    labels = [item.match for item in labelled]
    threshold = best_threshold(labelled, scores)
    in_sample = verdicts(labelled, scores, threshold)
    folded, chosen = out_of_fold(labelled, scores)
    sure = [i for i, item in enumerate(labelled) if not item.unsure]
    strata = sorted({item.stratum for item in labelled})
    return {
        "pairs": len(labelled),
        "matches_labelled": sum(labels),
        "unsure": len(labelled) - len(sure),
        "threshold": threshold,
        "fold_thresholds": chosen,
        "out_of_fold": agreement(folded, labels).as_dict(),
        "in_sample": agreement(in_sample, labels).as_dict(),
        "sure_labels_out_of_fold": agreement([folded[i] for i in sure], [labels[i] for i in sure]).as_dict(),
        "by_stratum_out_of_fold": {
            stratum: agreement(
                [folded[i] for i, item in enumerate(labelled) if item.stratum == stratum],
                [item.match for item in labelled if item.stratum == stratum],
            ).as_dict()
            for stratum in strata
        },
    }


def table(result: dict[str, Any]) -> str:
    """The report as a Markdown table."""
    rows = [
        ("out of fold", result["out_of_fold"]),
        ("out of fold, sure labels", result["sure_labels_out_of_fold"]),
        ("in sample", result["in_sample"]),
        *((f"out of fold, {name}", figures) for name, figures in result["by_stratum_out_of_fold"].items()),
    ]
    lines = [
        f"threshold {result['threshold']} (folds chose {result['fold_thresholds']}); {result['pairs']} pairs, "
        f"{result['matches_labelled']} labelled matches, {result['unsure']} unsure",
        "",
        "| pairs | n | labelled yes | said yes | precision | recall | F1 | accuracy | kappa |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, f in rows:
        lines.append(
            f"| {name} | {f['n']} | {f['tp'] + f['fn']} | {f['tp'] + f['fp']} | {f['precision']:.3f} | "
            f"{f['recall']:.3f} | {f['f1']:.3f} | {f['accuracy']:.3f} | {f['kappa']:.3f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Score the labelled pairs, choose the threshold, print the agreement (and write it as JSON with --json)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--labels", type=Path, default=LABELS, help=f"the labelled pairs (default: {LABELS})")
    parser.add_argument("--threads", type=Path, default=THREADS, help=f"the threads file (default: {THREADS})")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    labelled = read_labelled(args.labels, args.threads)
    embedder = OnnxEmbedder()
    embedder.load()
    scores = Matcher(embedder).scores([item.pair for item in labelled])
    result = report(labelled, scores)
    print(table(result))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
