"""Fit the learned re-ranker (``vigil/knowledge/reranking.py``) and measure it against the fusion, out of fold.

    python -m bench.rerank                 # fit on everything tunable; print the model and the cross-validation
    python -m bench.rerank --gbm           # also gradient boosting (scikit-learn), for comparison

Each example is one query's shortlist: the first ``reranking.SHORTLIST`` hits of ``KnowledgeStore.search`` without
the re-ranker (the fusion and the near-miss stage), each candidate labelled by whether it answers the query. Only
data that may be tuned on:
- the tune half of the team's Brightwave phrasings and of the near-miss traps (``bench.eval_phrasings.split_of``);
- the tune half of the second company's phrasings (Ferncastle Energy, its own help centre);
- held-out FAQ alternates: the last alternate of every Brightwave FAQ with three or more, taken out of the index
  and asked (right: its FAQ);
- the tau2 banking dev tasks (right: the required documents), long situations rather than chat questions.

Cross-validation by group (a phrasing's target entry, an alternate's FAQ, a banking task), five folds, so that
paraphrases of one entry are never on both sides. Reported per source: hit@1, hit@5 and MRR of the fusion's order and
of the re-ranked order out of fold; and the coefficients fitted on all of it, for ``reranking.MODEL``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench.eval_phrasings import Suite, held_out_faqs, suites
from bench.knowledge_env import BANKING, banking_documents, knowledge_store
from vigil.answers.calibration import fit
from vigil.knowledge import reranking
from vigil.knowledge.documents import Entry
from vigil.knowledge.reranking import FEATURES, SHORTLIST, Reranker

L2 = 1.0
FOLDS = 5


@dataclass(frozen=True, slots=True)
class Shortlist:
    """One query's candidates: their features and labels, in the fusion's order."""

    source: str
    group: str
    rows: list[tuple[float, ...]]
    right: list[bool]
    answerable: bool


async def shortlists(
    entries: Sequence[Entry], queries: Sequence[tuple[str, set[str], str]], source: str
) -> list[Shortlist]:
    found = []
    async with knowledge_store() as knowledge:
        await knowledge.upsert(entries)
        for text, right, group in queries:
            hits = await knowledge.search(text, SHORTLIST)
            found.append(
                Shortlist(
                    source,
                    group,
                    reranking.features(text, hits),
                    [h.entry_id in right for h in hits],
                    bool(right),
                )
            )
    return found


async def examples() -> list[Shortlist]:
    found: list[Shortlist] = []
    for suite in suites():
        rows = suite.rows("tune")
        queries = [(r["text"], set(r["answer_ids"]), f"{suite.name}:{Suite.target(r)}") for r in rows]
        found += await shortlists(suite.entries(), queries, f"{suite.name} phrasings, tune half")
    indexed, held_out = held_out_faqs()
    found += await shortlists(
        indexed,
        [(text, {entry_id}, f"alt:{entry_id}") for entry_id, text in held_out.items()],
        "held-out FAQ alternates",
    )
    tasks = json.loads((BANKING / "tasks-dev.json").read_text())
    found += await shortlists(
        banking_documents(),
        [
            (t["user_scenario"]["instructions"], set(t["required_documents"]), f"bank:{t.get('id', n)}")
            for n, t in enumerate(tasks)
        ],
        "tau2 banking dev tasks",
    )
    return found


def fold_of(group: str) -> int:
    return int(hashlib.sha256(group.encode()).hexdigest(), 16) % FOLDS


def flat(items: Sequence[Shortlist]) -> tuple[list[tuple[float, ...]], list[bool]]:
    return [r for s in items for r in s.rows], [y for s in items for y in s.right]


def scores_out_of_fold(found: Sequence[Shortlist], *, gbm: bool) -> list[list[float]]:
    """Each shortlist's candidate scores from a model fitted without its fold."""
    scored: list[list[float]] = [[] for _ in found]
    for fold in range(FOLDS):
        inside = [s for s in found if fold_of(s.group) != fold]
        x, y = flat(inside)
        if gbm:
            from sklearn.ensemble import HistGradientBoostingClassifier  # type: ignore[import-untyped]

            model = HistGradientBoostingClassifier(max_iter=150, learning_rate=0.05, max_leaf_nodes=8, random_state=0)
            model.fit(np.asarray(x), np.asarray(y))
            for i, s in enumerate(found):
                if fold_of(s.group) == fold and s.rows:
                    scored[i] = list(model.predict_proba(np.asarray(s.rows))[:, 1])
        else:
            logistic = fit(x, y, l2=L2)
            model = Reranker(logistic.weights, logistic.bias)
            for i, s in enumerate(found):
                if fold_of(s.group) == fold:
                    scored[i] = [model.probability(r) for r in s.rows]
    return scored


def measures(right: Sequence[bool], scores: Sequence[float] | None) -> tuple[float, float, float]:
    """hit@1, hit@5 and reciprocal rank of the first right candidate, in the fusion's order (``scores`` None) or
    by score (ties: the fusion's order)."""
    order = list(range(len(right)))
    if scores is not None:
        order.sort(key=lambda i: (-scores[i], i))
    ranked = [right[i] for i in order]
    first = next((n for n, r in enumerate(ranked) if r), None)
    return float(first == 0), float(first is not None and first < 5), 0.0 if first is None else 1.0 / (1 + first)


def report(found: list[Shortlist], *, gbm: bool) -> None:
    x, y = flat(found)
    logistic = fit(x, y, l2=L2)
    weights = ", ".join(f"{w:.3f}" for w in logistic.weights)
    print(f"MODEL = Reranker(weights=({weights}), bias={logistic.bias:.3f})  # reranking.py, L2 {L2}")
    print("  " + ", ".join(f"{n} {w:+.2f}" for n, w in zip(FEATURES, logistic.weights, strict=True)))
    print(f"  {len(found)} shortlists, {len(y)} candidates, {sum(y)} right\n")
    variants: dict[str, list[list[float]] | None] = {
        "fusion": None,
        "logistic (out of fold)": scores_out_of_fold(found, gbm=False),
    }
    if gbm:
        variants["gradient boosting (out of fold)"] = scores_out_of_fold(found, gbm=True)
    by_source: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(found):
        if s.answerable:
            by_source[s.source].append(i)
    print("| source | n | variant | hit@1 | hit@5 | MRR |\n|---|---:|---|---:|---:|---:|")
    for source, rows in by_source.items():
        for name, scored in variants.items():
            m = np.mean([measures(found[i].right, None if scored is None else scored[i]) for i in rows], axis=0)
            print(f"| {source} | {len(rows)} | {name} | {m[0]:.3f} | {m[1]:.3f} | {m[2]:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gbm", action="store_true", help="also cross-validate gradient boosting")
    args = parser.parse_args()
    report(asyncio.run(examples()), gbm=args.gbm)


if __name__ == "__main__":
    main()
