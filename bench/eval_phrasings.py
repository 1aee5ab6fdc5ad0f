"""Brightwave questions in customers' own words: what `vigil kb search` ranks first, and what the answer skill says.

    python -m bench.eval_phrasings

Data: ``bench/data/brightwave-phrasings.jsonl``, 195 phrasings the team wrote from the help centre alone (none a
copy of an FAQ question or alternate), each with the entries that answer it; 56 are near-miss traps (solid vs
flashing light, keeping vs leaving a number) and 18 are questions the help centre does not answer. The bundled
help centre (``knowledge/articles``, ``knowledge/faqs``) is imported into a throwaway store. Reported: search
hit@1 and hit@5; what the answer skill proposes (before the gate), how many cite a right entry first, and of those
at confidence 0.8 or more, how many are right (issue 11's bar: 95%); and how often the skill's answer is not
search's first hit.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.knowledge_env import knowledge_store
from vigil.answers.settings import AnswerSettings
from vigil.answers.skill import AnswerSkill
from vigil.knowledge.documents import discover, read
from vigil.wire.events import Message

ROOT = Path(__file__).resolve().parent.parent
PHRASINGS = ROOT / "bench" / "data" / "brightwave-phrasings.jsonl"
CONFIDENT = 0.8


@dataclass(frozen=True, slots=True)
class Outcome:
    answerable: bool
    hard: bool
    search_first: bool
    search_top5: bool
    answered: bool
    right: bool
    confidence: float
    agrees_with_search: bool


async def outcomes() -> list[Outcome]:
    rows = [json.loads(line) for line in PHRASINGS.read_text("utf-8").splitlines() if line.strip()]
    entries = [
        entry
        for path in discover([ROOT / "knowledge" / "articles", ROOT / "knowledge" / "faqs"])
        for entry in read(path)
    ]
    results: list[Outcome] = []
    async with knowledge_store() as knowledge:
        await knowledge.upsert(entries)
        skill = AnswerSkill(knowledge, AnswerSettings())
        for number, row in enumerate(rows):
            right = set(row["answer_ids"])
            ranked = [hit.entry_id for hit in await knowledge.search(row["text"], 5)]
            message = Message(
                type="message",
                schema_version=1,
                message_id=f"p-{number}",
                conversation_id=f"c-{number}",
                sent_at=datetime(2026, 11, 2, 9, 0, tzinfo=UTC),
                role="customer",
                text=row["text"],
            )
            proposals = await skill.propose(message, None)
            cited = proposals[0].sources[0].id if proposals and proposals[0].sources else None
            results.append(
                Outcome(
                    answerable=bool(right),
                    hard=bool(row.get("hard")),
                    search_first=bool(ranked) and ranked[0] in right,
                    search_top5=bool(right & set(ranked)),
                    answered=bool(proposals),
                    right=cited in right,
                    confidence=proposals[0].confidence if proposals else 0.0,
                    agrees_with_search=bool(ranked) and cited == ranked[0],
                )
            )
    return results


def report(results: list[Outcome]) -> list[str]:
    lines = [
        "| subset | n | search hit@1 | search hit@5 | proposed | right first | shown at ≥ 0.8 | right at ≥ 0.8 "
        "| answer ≠ search's first |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, subset in (
        ("answerable", [r for r in results if r.answerable]),
        ("near-miss traps", [r for r in results if r.answerable and r.hard]),
        ("not answered by the help centre", [r for r in results if not r.answerable]),
    ):
        n = len(subset)
        answered = [r for r in subset if r.answered]
        confident = [r for r in answered if r.confidence >= CONFIDENT]
        search1 = f"{sum(r.search_first for r in subset) / n:.3f}" if subset[0].answerable else "-"
        search5 = f"{sum(r.search_top5 for r in subset) / n:.3f}" if subset[0].answerable else "-"
        right_confident = f"{sum(r.right for r in confident) / len(confident):.3f}" if confident else "-"
        lines.append(
            f"| {name} | {n} | {search1} | {search5} | {len(answered)} | {sum(r.right for r in answered)} "
            f"| {len(confident)} | {right_confident} | {sum(not r.agrees_with_search for r in answered)} |"
        )
    return lines


def main() -> None:
    print("\n".join(report(asyncio.run(outcomes()))))


if __name__ == "__main__":
    main()
