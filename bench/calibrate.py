"""Fit the answer skill's confidence models (``vigil/answers/skill.py``) and report how well calibrated they are.

    python -m bench.calibrate

FAQ model, features (similarity of the nearest FAQ question, margin over the next FAQ):
- positives and negatives from held-out paraphrases: the last alternate of every Brightwave FAQ is removed from the
  index and asked; the label is whether the nearest FAQ is its own;
- negatives: real questions that no Brightwave FAQ answers (customer questions from #ubuntu IRC, the dev half of
  ``bench/data/question-labels.jsonl``).
Retrieval model, features (dense similarity of the best hit, log(1 + its BM25 score), its dense lead):
- the tau2 banking dev tasks (label: the best hit is a required document);
- the held-out FAQ paraphrases searched over the whole help centre (label: the best hit is that FAQ);
- the same off-topic IRC questions against the Brightwave help centre (label: 0).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from bench.eval_questions import load as load_labelled
from bench.eval_questions import split_of
from bench.knowledge_env import BANKING, banking_documents, knowledge_store
from vigil.answers.calibration import Logistic, brier, expected_calibration_error, fit
from vigil.answers.skill import faq_features, retrieval_features
from vigil.knowledge.documents import Entry, discover, read

KNOWLEDGE = Path(__file__).resolve().parent.parent / "knowledge"


def help_centre() -> list[Entry]:
    return [e for p in discover([KNOWLEDGE / "articles", KNOWLEDGE / "faqs"]) for e in read(p)]


def off_topic_questions() -> list[str]:
    return [r.text for r in load_labelled() if r.asks and split_of(r.thread_id) == "dev"]


def held_out_faqs() -> tuple[list[Entry], dict[str, str]]:
    """The help centre with the last alternate of each FAQ removed, and those alternates by FAQ id."""
    held_out: dict[str, str] = {}
    indexed = []
    for entry in help_centre():
        if entry.kind == "faq" and len(entry.questions) > 2:
            held_out[entry.id] = entry.questions[-1]
            indexed.append(replace(entry, questions=entry.questions[:-1]))
        else:
            indexed.append(entry)
    return indexed, held_out


async def faq_data() -> tuple[list[list[float]], list[bool]]:
    indexed, held_out = held_out_faqs()
    features: list[list[float]] = []
    labels: list[bool] = []
    async with knowledge_store() as knowledge:
        await knowledge.upsert(indexed)
        for entry_id, question in held_out.items():
            match = await knowledge.match_faq(question)
            if match is not None:
                features.append(list(faq_features(match)))
                labels.append(match.entry_id == entry_id)
        for question in off_topic_questions():
            match = await knowledge.match_faq(question)
            if match is not None:
                features.append(list(faq_features(match)))
                labels.append(False)
    return features, labels


async def retrieval_data() -> tuple[list[list[float]], list[bool]]:
    import json

    features: list[list[float]] = []
    labels: list[bool] = []
    async with knowledge_store() as knowledge:
        await knowledge.upsert(banking_documents())
        for task in json.loads((BANKING / "tasks-dev.json").read_text()):
            hits = await knowledge.search(task["user_scenario"]["instructions"], 3)
            if hits:
                features.append(list(retrieval_features(hits)))
                labels.append(hits[0].entry_id in set(task["required_documents"]))
    indexed, held_out = held_out_faqs()
    async with knowledge_store() as knowledge:
        await knowledge.upsert(indexed)
        for entry_id, question in held_out.items():  # in-domain: does the best hit hold the answer?
            hits = await knowledge.search(question, 3)
            features.append(list(retrieval_features(hits)))
            labels.append(hits[0].entry_id == entry_id)
        for question in off_topic_questions():
            hits = await knowledge.search(question, 3)
            if hits:
                features.append(list(retrieval_features(hits)))
                labels.append(False)
    return features, labels


def report(name: str, model: Logistic, features: list[list[float]], labels: list[bool]) -> None:
    print(f"{name}: {model}")
    print(
        f"  {len(labels)} examples, {sum(labels)} positive; Brier {brier(model, features, labels):.3f}, "
        f"ECE {expected_calibration_error(model, features, labels):.3f}"
    )


async def main() -> None:
    faq_x, faq_y = await faq_data()
    report("FAQ_MODEL", fit(faq_x, faq_y), faq_x, faq_y)
    ret_x, ret_y = await retrieval_data()
    report("RETRIEVAL_MODEL", fit(ret_x, ret_y), ret_x, ret_y)


if __name__ == "__main__":
    asyncio.run(main())
