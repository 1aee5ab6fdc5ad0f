"""How long one `KnowledgeStore.search` takes, in process: what the daemon spends ranking per question.

    python -m bench.search_latency

The bundled help centre is imported into a throwaway store; each of the team's 195 Brightwave phrasings
(``bench/data/brightwave-phrasings.jsonl``; short chat questions, the daemon's load) is searched once, after a warm-up
on other texts, and timed from the call to the hits: embedding the query (and its sentences), Chroma, BM25 and the
ranking. Each text is new to the store, so nothing comes from its cache of recent vectors. Reported: median, p90 and
p99 in milliseconds, and the same for a sample of the tau2 banking dev tasks' situations (long, many sentences) over
the banking documents when ``--banking`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

from bench.eval_phrasings import help_centre, phrasings
from bench.knowledge_env import BANKING, banking_documents, knowledge_store
from vigil.knowledge.store import KnowledgeStore

WARM_UP = [
    "hello, is anyone there",
    "my internet is down",
    "how do I pay my bill",
    "what are your opening hours",
    "I want to cancel",
]


async def timed(knowledge: KnowledgeStore, texts: list[str]) -> list[float]:
    for text in WARM_UP:
        await knowledge.search(text, 5)
    took = []
    for text in texts:
        started = time.perf_counter()
        await knowledge.search(text, 5)
        took.append((time.perf_counter() - started) * 1000)
    return took


def line(name: str, took: list[float]) -> str:
    ordered = sorted(took)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    p99 = ordered[int(0.99 * (len(ordered) - 1))]
    return f"| {name} | {len(took)} | {statistics.median(took):.1f} | {p90:.1f} | {p99:.1f} |"


async def main(banking: bool) -> None:
    print("| queries | n | median ms | p90 ms | p99 ms |\n|---|---:|---:|---:|---:|")
    async with knowledge_store() as knowledge:
        await knowledge.upsert(help_centre())
        print(line("Brightwave phrasings", await timed(knowledge, [row["text"] for row in phrasings("all")])))
    if banking:
        tasks = json.loads((BANKING / "tasks-dev.json").read_text())
        async with knowledge_store() as knowledge:
            await knowledge.upsert(banking_documents())
            texts = [task["user_scenario"]["instructions"] for task in tasks]
            print(line("tau2 banking situations", await timed(knowledge, texts)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--banking", action="store_true", help="also time the banking tasks' long situations")
    asyncio.run(main(parser.parse_args().banking))
