"""Retrieval quality on tau2-bench's banking knowledge base: hybrid (vigil) against BM25 alone and dense alone.

    python -m bench.eval_retrieval

The 698 documents are imported into a fresh store; each of the 39 dev tasks' customer situation
(``user_scenario.instructions``) is the query, and its ``required_documents`` are the relevant ones. Reported:
hit@5 (a required document in the top 5), recall@10 (share of the required documents in the top 10) and MRR.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence

from bench.knowledge_env import BANKING, banking_documents, knowledge_store
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
    vector = (await asyncio.to_thread(knowledge._embedder.embed, [query]))[0]
    dense = _entries(
        snapshot.passages, [h.id for h in await asyncio.to_thread(knowledge._passages.query, vector, 200, None)]
    )
    return {"hybrid (vigil)": hybrid, "BM25 only": lexical, "dense only": dense}


def _entries(passages: dict[str, _IndexedPassage], passage_ids: Sequence[str]) -> list[str]:
    seen: list[str] = []
    for passage_id in passage_ids:
        entry = passages[passage_id].entry_id
        if entry not in seen:
            seen.append(entry)
    return seen[:10]


async def main() -> None:
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


if __name__ == "__main__":
    asyncio.run(main())
