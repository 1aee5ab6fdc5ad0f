"""Cross-validated retrieval variants: each variant's parameters chosen on training folds, scored on the held-out one.

    python -m bench.eval_retrieval --cv 5 --seeds 0 1 2

What is expensive is computed once per query and kept in memory (``Primitives``): the passage vectors (read back
from the store's Chroma collection), the query's and each sentence's vector (the real model), their dense and BM25
passage rankings (vigil's lexical index), the RM3-expanded BM25 rankings and a BM25 ranking of entry titles. A grid
point then only fuses and folds ids with ``vigil.knowledge.fusion``, so every point is scored on every task once;
cross-validation picks, per training set, the point with the best mean of hit@5 + recall@10 + MRR and reports the
held-out tasks' metrics at that point. Folds are by task, shuffled with a fixed seed; the estimate is the mean over
the held-out tasks, and its spread is shown across seeds.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from vigil.knowledge.embedding import Vectors
from vigil.knowledge.fusion import (
    Expansion,
    Rankings,
    Recipe,
    aggregate,
    expanded_search,
    fuse,
    rank,
    reciprocal_rank,
    sentences,
)
from vigil.knowledge.lexical import LexicalIndex
from vigil.knowledge.store import CANDIDATES, KnowledgeStore

Metrics = tuple[float, float, float]


@dataclass(frozen=True, slots=True)
class Primitives:
    """One query's rankings, as the store's parts give them (passage ids / entry ids, best first)."""

    whole: Rankings
    parts: tuple[Rankings, ...]
    titles: tuple[str, ...]
    expanded: dict[Expansion, tuple[str, ...]]
    """The whole query's BM25 ranking after RM3, per expansion."""


def metrics(ranked: Sequence[str], relevant: set[str]) -> Metrics:
    """hit@5, recall@10 and reciprocal rank of one ranking (rank 1 is best)."""
    hit5 = float(any(doc in relevant for doc in ranked[:5]))
    recall10 = len(relevant & set(ranked[:10])) / len(relevant)
    rr = next((1.0 / n for n, doc in enumerate(ranked, start=1) if doc in relevant), 0.0)
    return hit5, recall10, rr


class Corpus:
    """A store's passages and entries as the grid needs them: passage vectors, the entry of each passage, a title
    index. Built once after the import."""

    def __init__(self, knowledge: KnowledgeStore) -> None:
        snapshot = knowledge._snapshot
        self.knowledge = knowledge
        self.snapshot = snapshot
        found = knowledge._passages._collection.get(include=["embeddings"])
        vectors = dict(zip(found["ids"], found["embeddings"], strict=True))
        self.passage_ids = [p for p in snapshot.passages if p in vectors]
        self.matrix = np.asarray([vectors[p] for p in self.passage_ids], dtype=np.float32)
        self.entry_ids = list(snapshot.entries)
        self.titles = LexicalIndex(self.entry_ids, [snapshot.entries[e].title for e in self.entry_ids])

    def entry_of(self, passage_id: str) -> str | None:
        passage = self.snapshot.passages.get(passage_id)
        return passage.entry_id if passage is not None else None

    def text_of(self, passage_id: str) -> str:
        return self.snapshot.passages[passage_id].text

    def dense(self, vectors: Vectors) -> list[tuple[str, ...]]:
        """The ``CANDIDATES`` nearest passages of each vector (exact cosine: what Chroma's index approximates)."""
        similarity = vectors @ self.matrix.T
        best = np.argsort(-similarity, axis=1, kind="stable")[:, :CANDIDATES]
        return [tuple(self.passage_ids[int(i)] for i in row) for row in best]

    def lexical(self, text: str) -> tuple[str, ...]:
        return tuple(h.passage_id for h in self.snapshot.lexical.search(text, CANDIDATES))

    async def primitives(self, query: str, expansions: Sequence[Expansion]) -> Primitives:
        split = sentences(query)
        vectors = await asyncio.to_thread(self.knowledge._embedder.embed, [query, *split])
        dense = self.dense(vectors)
        return Primitives(
            whole=Rankings(dense[0], self.lexical(query)),
            parts=tuple(Rankings(d, self.lexical(s)) for d, s in zip(dense[1:], split, strict=True)),
            titles=tuple(h.passage_id for h in self.titles.search(query, CANDIDATES)),
            expanded={
                e: tuple(
                    h.passage_id for h in expanded_search(self.snapshot.lexical, query, self.text_of, e, CANDIDATES)
                )
                for e in expansions
            },
        )


def ranked_entries(p: Primitives, recipe: Recipe, corpus: Corpus, cache: dict[tuple[object, ...], object]) -> list[str]:
    """The ten best entries for one query under ``recipe``: what ``fusion.rank`` computes, with the per-sentence
    fusions memoised (they do not depend on the aggregation or title parameters)."""
    whole = p.whole if recipe.expansion is None else Rankings(p.whole.dense, p.expanded[recipe.expansion])

    def one(r: Rankings) -> dict[str, float]:
        return fuse(
            [
                reciprocal_rank(r.dense, k=recipe.rrf_k, weight=recipe.dense_weight),
                reciprocal_rank(r.lexical, k=recipe.rrf_k, weight=recipe.lexical_weight),
            ]
        )

    key = (id(p), recipe.rrf_k, recipe.dense_weight, recipe.lexical_weight, recipe.sentence_weight, recipe.expansion)
    scores = cache.get(key)
    if scores is None:
        pieces = [one(whole)]
        if recipe.sentence_weight > 0 and p.parts:
            sentence_key = (id(p), recipe.rrf_k, recipe.dense_weight, recipe.lexical_weight)
            mean = cache.get(sentence_key)
            if mean is None:
                mean = cache[sentence_key] = fuse([one(r) for r in p.parts], scale=1.0 / len(p.parts))
            assert isinstance(mean, dict)
            pieces.append({k: v * recipe.sentence_weight for k, v in mean.items()})
        scores = cache[key] = fuse(pieces)
    assert isinstance(scores, dict)
    entries = aggregate(scores, corpus.entry_of, rule=recipe.rule, top=recipe.top, temperature=recipe.temperature)
    if recipe.title_weight > 0 and p.titles:
        known = dict(entries)
        boost = reciprocal_rank(p.titles, k=recipe.rrf_k, weight=recipe.title_weight)
        combined = {e: known.get(e, 0.0) + boost.get(e, 0.0) for e in known.keys() | boost.keys()}
        entries = sorted(combined.items(), key=lambda item: (-item[1], item[0]))
    return [e for e, _ in entries[:10]]


def check_against_rank(p: Primitives, recipe: Recipe, corpus: Corpus) -> None:
    """The memoised path must rank exactly as ``fusion.rank`` does (the function vigil would ship)."""
    whole = p.whole if recipe.expansion is None else Rankings(p.whole.dense, p.expanded[recipe.expansion])
    shipped = [e for e, _ in rank(whole, p.parts, corpus.entry_of, recipe, titles=p.titles)[:10]]
    here = ranked_entries(p, recipe, corpus, {})
    if shipped != here:
        raise AssertionError(f"the harness and fusion.rank disagree for {recipe}: {here} != {shipped}")


# --- the variants and their grids -------------------------------------------------------------------------------

RM3_GRID = tuple(
    Expansion(documents=d, terms=t, original_weight=w)
    for d, t, w in itertools.product((5, 10), (10, 20), (0.3, 0.5, 0.7))
)
_FUSION = [Recipe(rrf_k=k, dense_weight=w) for k, w in itertools.product((5, 20, 60), (0.3, 0.5, 0.7, 1.0))]
_AGGREGATION = [
    {"rule": "max"},
    *({"rule": "sum", "top": m} for m in (2, 3, 5)),
    *({"rule": "softmax", "top": m, "temperature": t} for m in (3, 5) for t in (0.05, 0.1, 0.2)),
]


def variants() -> dict[str, list[Recipe]]:
    """Each variant's grid, simplest point first (ties on the training folds go to the earlier point)."""
    return {
        "BM25 only": [Recipe(dense_weight=0.0)],
        "dense only": [Recipe(lexical_weight=0.0, dense_weight=1.0)],
        "shipped hybrid (k 5, dense 0.7; fixed, was tuned on all 39)": [Recipe()],
        "hybrid RRF, k and dense weight tuned": _FUSION,
        "+ sentences": [replace(r, sentence_weight=s) for r in _FUSION for s in (0.5, 1.0, 2.0, 4.0)],
        "+ title field": [replace(r, title_weight=t) for r in _FUSION for t in (0.25, 0.5, 1.0)],
        "+ aggregation (sum / softmax)": [replace(r, **a) for r in _FUSION for a in _AGGREGATION[1:]],  # type: ignore[arg-type]
        "+ RM3 on BM25": [replace(r, expansion=e) for r in _FUSION for e in RM3_GRID],
        "BM25 + RM3 alone": [Recipe(dense_weight=0.0, expansion=e) for e in RM3_GRID],
        "all of them": [
            replace(Recipe(rrf_k=k, dense_weight=w), sentence_weight=s, title_weight=t, expansion=e, **a)  # type: ignore[arg-type]
            for k, w, s, t, a, e in itertools.product(
                (5, 20, 60),
                (0.5, 0.7, 1.0),
                (0.0, 1.0, 2.0, 4.0),
                (0.0, 0.5),
                (_AGGREGATION[0], _AGGREGATION[2], _AGGREGATION[5]),
                (None, Expansion()),
            )
        ],
    }


def describe(recipe: Recipe) -> str:
    """A grid point in a few words (what differs from the BM25-and-dense default)."""
    words = [f"k {recipe.rrf_k:g}", f"dense {recipe.dense_weight:g}"]
    if recipe.lexical_weight != 1.0:
        words.append(f"bm25 {recipe.lexical_weight:g}")
    if recipe.sentence_weight:
        words.append(f"sent {recipe.sentence_weight:g}")
    if recipe.title_weight:
        words.append(f"title {recipe.title_weight:g}")
    if recipe.rule == "sum":
        words.append(f"sum{recipe.top}")
    elif recipe.rule == "softmax":
        words.append(f"softmax{recipe.top} T{recipe.temperature:g}")
    if recipe.expansion is not None:
        e = recipe.expansion
        words.append(f"rm3 {e.documents}/{e.terms}/{e.original_weight:g}")
    return ", ".join(words)


def score_grid(
    grid: Sequence[Recipe], queries: Sequence[Primitives], relevant: Sequence[set[str]], corpus: Corpus
) -> np.ndarray:
    """metrics[point, query, metric] for every grid point on every query."""
    cache: dict[tuple[object, ...], object] = {}
    table = np.zeros((len(grid), len(queries), 3))
    for q, (p, rel) in enumerate(zip(queries, relevant, strict=True)):
        for g, recipe in enumerate(grid):
            table[g, q] = metrics(ranked_entries(p, recipe, corpus, cache), rel)
        cache.clear()  # memoised fusions are per query
    return table


def folds(n: int, k: int, seed: int) -> list[list[int]]:
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return [sorted(order[i::k]) for i in range(k)]


def choose(table: np.ndarray, rows: Sequence[int]) -> int:
    """The grid point with the best mean hit@5 + recall@10 + MRR over ``rows`` (the first of equals)."""
    objective = table[:, rows, :].sum(axis=2).mean(axis=1)
    return int(np.flatnonzero(objective >= objective.max() - 1e-12)[0])


@dataclass(frozen=True, slots=True)
class CrossValidated:
    per_seed: list[Metrics]
    """Mean held-out metrics (hit@5, recall@10, MRR), one row per seed."""
    chosen: list[list[int]]
    """The grid point chosen for each fold, one list per seed."""
    full: int
    """The point chosen on all the tasks (what would ship)."""


def cross_validate(table: np.ndarray, k: int, seeds: Sequence[int]) -> CrossValidated:
    n = table.shape[1]
    per_seed: list[Metrics] = []
    chosen: list[list[int]] = []
    for seed in seeds:
        held = np.zeros((n, 3))
        picks: list[int] = []
        for test in folds(n, k, seed):
            train = [i for i in range(n) if i not in test]
            point = choose(table, train)
            picks.append(point)
            held[test] = table[point, test]
        per_seed.append(tuple(float(x) for x in held.mean(axis=0)))  # type: ignore[arg-type]
        chosen.append(picks)
    return CrossValidated(per_seed, chosen, choose(table, list(range(n))))


def spread(values: Sequence[float]) -> str:
    mean = statistics.fmean(values)
    return f"{mean:.3f} ± {statistics.pstdev(values):.3f}" if len(values) > 1 else f"{mean:.3f}"


def report_table(results: dict[str, CrossValidated], grids: dict[str, list[Recipe]], k: int) -> list[str]:
    lines = [
        "| variant | grid | hit@5 | recall@10 | MRR | chosen on all tasks |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, result in results.items():
        columns = [spread([row[i] for row in result.per_seed]) for i in range(3)]
        lines.append(f"| {name} | {len(grids[name])} | {' | '.join(columns)} | {describe(grids[name][result.full])} |")
    return lines


def report_choices(results: dict[str, CrossValidated], grids: dict[str, list[Recipe]]) -> list[str]:
    lines: list[str] = []
    for name, result in results.items():
        if len(grids[name]) == 1:
            continue
        lines.append(f"{name}:")
        for seed_number, picks in enumerate(result.chosen):
            lines.append(f"  seed #{seed_number}: " + " | ".join(describe(grids[name][p]) for p in picks))
    return lines
