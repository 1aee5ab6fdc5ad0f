"""A real tuning run, in process: a few training steps on a small knowledge set, the export, the gate, the record."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa

from tests.conftest import make_settings
from vigil.cases.store import CaseStore
from vigil.core.clock import SystemClock
from vigil.flow.leases import Lease
from vigil.knowledge import tuned
from vigil.knowledge.documents import Entry, Passage
from vigil.knowledge.embedding import SHIPPED, embedder_for
from vigil.knowledge.tables import VERDICT
from vigil.knowledge.tuner import LEASE, Busy, stored_verdicts, tune, tune_with_lease
from vigil.knowledge.tuning import Verdict
from vigil.mining.miner import LEASE as MINER_LEASE

# Loading torch and the model in a child process, a few steps, an ONNX export, then both models judged: ~1 minute
# alone, more on a loaded machine.
pytestmark = pytest.mark.timeout(600)

TOPICS = [
    ("bill", "When is my bill taken?", "what day do you take payment", "when does the direct debit leave"),
    ("router", "How do I reset my router?", "router frozen", "hold the reset button"),
    ("move", "I am moving house", "new address", "taking broadband to a new home"),
    ("sim", "My SIM card is not working", "no signal on my new sim", "sim says invalid"),
    ("roam", "Can I use my phone abroad?", "roaming charges in spain", "data in france"),
    ("cancel", "How do I cancel my contract?", "leave brightwave", "end my plan early"),
    ("speed", "My broadband is slow", "internet crawling tonight", "speed much lower than promised"),
    ("email", "How do I change my email address?", "update contact email", "wrong email on account"),
    ("pay", "How can I pay my bill?", "pay by card", "settle what I owe"),
    ("lost", "My phone was stolen", "lost my mobile", "block my stolen handset"),
    ("tv", "How do I add TV channels?", "add sports package", "more channels on my box"),
    ("engineer", "When will the engineer arrive?", "engineer appointment time", "technician visit slot"),
]


def faqs() -> list[Entry]:
    return [
        Entry(
            id=f"faq-{key}",
            kind="faq",
            title=question,
            body=f"Here is what to do about: {question.lower()}",
            origin="test",
            questions=(question, *alternates),
            passages=(Passage(f"faq-{key}#1", None, f"{question}\nHere is what to do about: {question.lower()}"),),
        )
        for key, question, *alternates in TOPICS
    ]


async def test_a_tuning_run_trains_exports_judges_and_records_its_decision(tmp_path: Path):
    settings = make_settings(tmp_path=tmp_path).knowledge.model_copy(
        # A Chroma server that is not there: the run judges on throwaway stores of its own, never on the shared one.
        update={"tune_epochs": 1, "tune_batch_size": 8, "tune_threads": 2, "chroma_url": "http://127.0.0.1:9"}
    )
    verdicts = [Verdict("do you take the money on the first", "faq-bill", accepted=True)]
    manifest = await tune(faqs(), settings, data_dir=tmp_path, clock=SystemClock(), verdicts=verdicts)

    assert manifest.counts["held_back"] == len(TOPICS)  # one alternate of each FAQ, never trained on
    assert manifest.counts["verdicts_accepted"] == 1
    assert manifest.training["steps"] >= 3 and manifest.training["first_loss"] > 0
    # Both judged as served and by themselves, the tuned one on its ONNX export.
    assert manifest.shipped["probes"] == manifest.tuned["probes"] == len(TOPICS)
    assert manifest.alone["shipped"]["probes"] == manifest.alone["tuned"]["probes"] == len(TOPICS)
    assert manifest.base == SHIPPED and len(manifest.base_hash) == 16
    assert tuned.last_run(tmp_path) == manifest  # the decision is recorded, kept or not
    if manifest.accepted:
        assert tuned.current(tmp_path) == manifest
        model = embedder_for(settings, tmp_path)  # what every process on this data dir now serves
        assert model.name == manifest.version
        model.load()
        vectors = model.embed(["my router is frozen", "roaming in spain"])
        assert vectors.shape == (2, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    else:
        assert tuned.current(tmp_path) is None
        assert not tuned.model_folder(tmp_path, manifest.version).exists()
        assert list(tuned.onnx_dir(tmp_path).glob(f"{manifest.version}-*")) == []
        assert embedder_for(settings, tmp_path).name == SHIPPED


async def test_a_run_waits_for_no_miner_it_finds_the_miners_lease_held_and_does_nothing(
    store: CaseStore, tmp_path: Path
):
    assert LEASE == MINER_LEASE  # one lease: the miner and tuning never overlap, whoever starts either
    miner = Lease(store.engine, MINER_LEASE, owner="replica-2", clock=SystemClock(), duration_s=600.0)
    assert await miner.take() is None

    async def entries() -> list[Entry]:
        raise AssertionError("a run that cannot take the lease reads nothing")

    settings = make_settings(tmp_path=tmp_path).knowledge
    with pytest.raises(Busy, match="held by replica-2"):
        await tune_with_lease(entries, settings, data_dir=tmp_path, engine=store.engine, clock=SystemClock())
    assert tuned.last_run(tmp_path) is None
    await miner.free()


async def test_a_run_learns_from_the_verdicts_the_knowledge_keeps_newest_first(store: CaseStore):
    at = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    said = [("accepted", "faq-bill"), ("edited", "faq-pay"), ("dismissed", "faq-late"), ("approved", "faq-x")]
    async with store.engine.begin() as conn:
        await conn.execute(
            sa.insert(VERDICT),
            [
                {
                    "conversation_id": "c-1",
                    "feedback_id": f"f-{n}",
                    "tenant": "brightwave",
                    "entry_id": entry,
                    "verdict": verdict,
                    "question": f"question {n}",
                    "suggestion_id": f"s-{n}",
                    "message_id": f"m-{n}",
                    "at": at + timedelta(minutes=n),
                    "received_at": at + timedelta(minutes=n),
                }
                for n, (verdict, entry) in enumerate(said)
            ],
        )
    assert await stored_verdicts(store.engine) == [
        Verdict("question 2", "faq-late", accepted=False),
        Verdict("question 1", "faq-pay", accepted=True),  # an edited answer's entry answered the question too
        Verdict("question 0", "faq-bill", accepted=True),
    ]
    assert await stored_verdicts(store.engine, limit=1) == [Verdict("question 2", "faq-late", accepted=False)]
