"""Verdicts teach, measured: one analyst's verdict on one Brightwave phrasing, and what it does to the others.

    python -m bench.eval_verdicts --split tune
    python -m bench.eval_verdicts --split tune --similar 0.6    # a verdict counting from cosine 0.6 (to 0.75)

For each phrasing of the split (``bench/data/brightwave-phrasings.jsonl``, the halves of ``bench.eval_phrasings``)
whose first hit is wrong, an analyst dismisses that answer; for each whose first hit is right, one accepts it. Each
verdict is given alone, in a tenant of its own, and then every other answerable phrasing of the split is searched
for that tenant. Reported, separately for the phrasings of the same entry (other customers with the same need) and
for the rest: how many first hits the verdict fixed (wrong to right), broke (right to wrong) or changed otherwise.

The phrasings were written to be many customers' different ways of asking: of the tune half's 3,828 pairs, one is
at cosine 0.75 or more, where a verdict starts to count. So this measures what verdicts must not do (move other
questions' answers) more than what they are for (the next customer asking the same way, as
``tests/knowledge/test_verdicts.py`` shows); ``--similar`` shows what a lower threshold would do.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from bench.eval_phrasings import help_centre, phrasings
from bench.knowledge_env import knowledge_store
from vigil.knowledge import verdicts
from vigil.knowledge.store import KnowledgeStore
from vigil.knowledge.verdicts import Verdict, record


async def _first(knowledge: KnowledgeStore, text: str, tenant: str | None) -> str | None:
    hits = await knowledge.search(text, 3, tenant=tenant)
    return hits[0].entry_id if hits else None


async def _judge(knowledge: KnowledgeStore, n: int, row: dict[str, Any], entry_id: str, verdict: str) -> str:
    tenant = f"trial-{n}"
    now = datetime.now(UTC)
    async with knowledge.engine.begin() as conn:
        await record(
            conn,
            Verdict(
                conversation_id=f"c-{n}",
                feedback_id=f"f-{n}",
                tenant=tenant,
                entry_id=entry_id,
                verdict=verdict,
                question=row["text"],
                suggestion_id=f"s-{n}",
                message_id=f"m-{n}",
                at=now,
                received_at=now,
            ),
        )
    await knowledge.refresh_if_changed()
    return tenant


def _effect(before: str | None, after: str | None, right: set[str]) -> str:
    if before == after:
        return "unchanged"
    if after in right and before not in right:
        return "fixed"
    if before in right and after not in right:
        return "broke"
    return "changed"


async def measure(split: str) -> dict[str, Counter[str]]:
    rows = [r for r in phrasings(split) if r["answer_ids"]]
    effects: dict[str, Counter[str]] = {
        f"{verdict}, {scope}": Counter()
        for verdict in ("dismissed", "accepted")
        for scope in ("same entry", "other entries")
    }
    async with knowledge_store() as knowledge:
        await knowledge.upsert(help_centre())
        firsts = [await _first(knowledge, r["text"], None) for r in rows]
        for n, row in enumerate(rows):
            first = firsts[n]
            if first is None:
                continue
            verdict = "accepted" if first in row["answer_ids"] else "dismissed"
            tenant = await _judge(knowledge, n, row, first, verdict)
            for m, other in enumerate(rows):
                if m == n:
                    continue
                scope = "same entry" if other["answer_ids"][0] == row["answer_ids"][0] else "other entries"
                after = await _first(knowledge, other["text"], tenant)
                effects[f"{verdict}, {scope}"][_effect(firsts[m], after, set(other["answer_ids"]))] += 1
    return effects


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=("tune", "test", "all"), default="tune")
    parser.add_argument("--similar", type=float, default=verdicts.SIMILAR, help="the cosine a verdict counts from")
    args = parser.parse_args()
    verdicts.FULL += args.similar - verdicts.SIMILAR  # the same ramp, moved
    verdicts.SIMILAR = args.similar
    started = time.perf_counter()
    effects = asyncio.run(measure(args.split))
    print(f"split {args.split}, verdicts from cosine {verdicts.SIMILAR} ({time.perf_counter() - started:.0f} s)")
    print("| verdict, on | searches | fixed | broke | changed otherwise | unchanged |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, counts in effects.items():
        print(
            f"| {name} | {sum(counts.values())} | {counts['fixed']} | {counts['broke']} | {counts['changed']} "
            f"| {counts['unchanged']} |"
        )


if __name__ == "__main__":
    main()
