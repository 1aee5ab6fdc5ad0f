"""Retrieval quality on tau2-bench's banking knowledge base: hybrid (vigil) against BM25 alone and dense alone.

    python -m bench.eval_retrieval                       # vigil's search as shipped, on the 39 dev tasks
    python -m bench.eval_retrieval --cv 5 --seeds 0 1 2  # the ranking variants, cross-validated (retrieval_cv.py)

With ``--cv`` each variant of ``vigil.knowledge.fusion`` (sentences, title field, passage aggregation, RM3) has its
parameters chosen on the training folds and is scored on the held-out fold; then the recipe each variant chooses
on all 39 tasks is run on the Brightwave help centre's phrasings (short customer questions, never tuned on).

The 698 documents are imported into a fresh store; each of the 39 dev tasks' customer situation
(``user_scenario.instructions``) is the query, and its ``required_documents`` are the relevant ones. Reported:
hit@5 (a required document in the top 5), recall@10 (share of the required documents in the top 10) and MRR.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable, Sequence

from bench import retrieval_cv
from bench.eval_phrasings import PHRASINGS, ROOT
from bench.knowledge_env import BANKING, banking_documents, knowledge_store
from vigil.knowledge.documents import discover, read
from vigil.knowledge.fusion import CROSS_VALIDATED
from vigil.knowledge.store import KnowledgeStore, _IndexedPassage

Ranker = Callable[[str], "asyncio.Future[list[str]]"]


def metrics(ranked: Sequence[str], relevant: set[str]) -> tuple[float, float, float]:
    """hit@5, recall@10 and reciprocal rank of one ranking."""
    hit5 = float(any(doc in relevant for doc in ranked[:5]))
    recall10 = len(relevant & set(ranked[:10])) / len(relevant)
    rr = next((1.0 / rank for rank, doc in enumerate(ranked, start=1) if doc in relevant), 0.0)
    return hit5, recall10, rr


async def rankings(knowledge: KnowledgeStore, query: str) -> dict[str, list[str]]:
    """The same query ranked three ways: vigil's fusion, BM25 alone, dense alone (documents, best first)."""
    snapshot = knowledge._snapshot
    hybrid = [h.entry_id for h in await knowledge.search(query, 10)]
    lexical = _entries(snapshot.passages, [h.passage_id for h in snapshot.lexical.search(query, 200)])
    vectors = await asyncio.to_thread(knowledge._embedder.embed, [query])
    (nearest,) = await asyncio.to_thread(knowledge._passages.query, vectors, 200, None)
    dense = _entries(snapshot.passages, [h.id for h in nearest])
    return {"hybrid (vigil)": hybrid, "BM25 only": lexical, "dense only": dense}


def _entries(passages: dict[str, _IndexedPassage], passage_ids: Sequence[str]) -> list[str]:
    seen: list[str] = []
    for passage_id in passage_ids:
        entry = passages[passage_id].entry_id
        if entry not in seen:
            seen.append(entry)
    return seen[:10]


async def shipped() -> None:
    tasks = json.loads((BANKING / "tasks-dev.json").read_text())
    async with knowledge_store() as knowledge:
        started = time.perf_counter()
        report = await knowledge.upsert(banking_documents())
        print(f"imported {report.added} documents in {time.perf_counter() - started:.1f}s")
        totals: dict[str, list[tuple[float, float, float]]] = {}
        for task in tasks:
            relevant = set(task["required_documents"])
            for system, ranked in (await rankings(knowledge, task["user_scenario"]["instructions"])).items():
                totals.setdefault(system, []).append(metrics(ranked, relevant))
    print(f"\n{len(tasks)} tasks (tau2 banking_knowledge, dev)\n")
    print("| system | hit@5 | recall@10 | MRR |\n|---|---:|---:|---:|")
    for system, rows in totals.items():
        hit5, recall10, mrr = (sum(column) / len(rows) for column in zip(*rows, strict=True))
        print(f"| {system} | {hit5:.3f} | {recall10:.3f} | {mrr:.3f} |")


async def cross_validated(k: int, seeds: list[int]) -> None:
    tasks = json.loads((BANKING / "tasks-dev.json").read_text())
    grids = retrieval_cv.variants()
    started = time.perf_counter()
    async with knowledge_store() as knowledge:
        await knowledge.upsert(banking_documents())
        corpus = retrieval_cv.Corpus(knowledge)
        queries = [await corpus.primitives(t["user_scenario"]["instructions"], retrieval_cv.RM3_GRID) for t in tasks]
        relevant = [set(t["required_documents"]) for t in tasks]
        searched = [
            retrieval_cv.metrics(
                [h.entry_id for h in await knowledge.search(t["user_scenario"]["instructions"], 10)], r
            )
            for t, r in zip(tasks, relevant, strict=True)
        ]
        print(f"primitives for {len(tasks)} tasks in {time.perf_counter() - started:.0f}s")
        tables = {}
        for name, grid in grids.items():
            for recipe in grid[:: max(1, len(grid) // 3)]:
                retrieval_cv.check_against_rank(queries[0], recipe, corpus)
            tables[name] = retrieval_cv.score_grid(grid, queries, relevant, corpus)
        print(f"grids scored in {time.perf_counter() - started:.0f}s")
    results = {name: retrieval_cv.cross_validate(table, k, seeds) for name, table in tables.items()}
    search = [sum(column) / len(searched) for column in zip(*searched, strict=True)]
    print(
        f"\nKnowledgeStore.search today on all {len(tasks)} dev tasks (its weights were tuned on them): "
        f"hit@5 {search[0]:.3f}, recall@10 {search[1]:.3f}, MRR {search[2]:.3f}"
    )
    print(f"\n{k}-fold cross-validation by task, seeds {seeds} (mean ± sd across seeds), tau2 banking dev\n")
    print("\n".join(retrieval_cv.report_table(results, grids, k)))
    print("\nchosen per fold:")
    print("\n".join(retrieval_cv.report_choices(results, grids)))
    chosen = {name: grids[name][result.full] for name, result in results.items()}
    together = chosen["all of them"]
    print(
        f"\nfusion.CROSS_VALIDATED {'is' if together == CROSS_VALIDATED else 'is NOT'} the recipe 'all of them' "
        f"chooses on all {len(tasks)} tasks ({retrieval_cv.describe(together)})"
    )
    print("\nBrightwave help centre, answerable phrasings (recipe chosen on all 39 dev tasks)\n")
    print("\n".join(await brightwave(chosen)))


async def brightwave(recipes: dict[str, retrieval_cv.Recipe]) -> list[str]:
    """Each variant's chosen recipe on the team's Brightwave phrasings: short questions must not suffer."""
    rows = [json.loads(line) for line in PHRASINGS.read_text("utf-8").splitlines() if line.strip()]
    rows = [row for row in rows if row["answer_ids"]]
    entries = [
        entry
        for path in discover([ROOT / "knowledge" / "articles", ROOT / "knowledge" / "faqs"])
        for entry in read(path)
    ]
    expansions = sorted({r.expansion for r in recipes.values() if r.expansion is not None}, key=repr)
    async with knowledge_store() as knowledge:
        await knowledge.upsert(entries)
        corpus = retrieval_cv.Corpus(knowledge)
        queries = [await corpus.primitives(row["text"], expansions) for row in rows]
        searched = [[h.entry_id for h in await knowledge.search(row["text"], 10)] for row in rows]
    lines = [
        f"{len(rows)} answerable phrasings, {sum(bool(r.get('hard')) for r in rows)} of them near-miss traps\n",
        "| variant (recipe) | hit@1 | hit@5 | MRR | traps hit@1 |",
        "|---|---:|---:|---:|---:|",
    ]

    def line(name: str, ranked: list[list[str]]) -> str:
        hit1 = [float(bool(r) and r[0] in set(row["answer_ids"])) for r, row in zip(ranked, rows, strict=True)]
        scored = [retrieval_cv.metrics(r, set(row["answer_ids"])) for r, row in zip(ranked, rows, strict=True)]
        traps = [h for h, row in zip(hit1, rows, strict=True) if row.get("hard")]
        return (
            f"| {name} | {sum(hit1) / len(rows):.3f} | {sum(s[0] for s in scored) / len(rows):.3f} "
            f"| {sum(s[2] for s in scored) / len(rows):.3f} | {sum(traps) / len(traps):.3f} |"
        )

    lines.append(line("KnowledgeStore.search today", searched))
    for name, recipe in recipes.items():
        cache: dict[tuple[object, ...], object] = {}
        ranked = [retrieval_cv.ranked_entries(p, recipe, corpus, cache) for p in queries]
        lines.append(line(f"{name} ({retrieval_cv.describe(recipe)})", ranked))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cv", type=int, metavar="K", help="cross-validate the ranking variants with K folds")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="fold shuffles (with --cv)")
    args = parser.parse_args()
    asyncio.run(shipped() if args.cv is None else cross_validated(args.cv, args.seeds))


if __name__ == "__main__":
    main()
