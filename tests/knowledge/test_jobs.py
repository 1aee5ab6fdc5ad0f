"""The knowledge refresh on the scheduler: what `vigil kb import` changes on the shared database reaches a running
daemon at the job's next window."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from tests.conftest import open_knowledge
from vigil.cases.store import CaseStore
from vigil.core.clock import ManualClock
from vigil.flow.leases import Holder
from vigil.flow.scheduler import Scheduler
from vigil.knowledge.embedding import Embedder
from vigil.knowledge.jobs import REFRESH, refresh_job, tune_job
from vigil.knowledge.onnx_embedding import OnnxEmbedder
from vigil.knowledge.store import KnowledgeStore
from vigil.knowledge.tuned import Manifest
from vigil.knowledge.tuner import Busy

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_the_refresh_job_picks_up_files_changed_added_and_removed(store: CaseStore, tmp_path: Path, embedder):  # type: ignore[no-untyped-def]
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "router.md").write_text("---\nid: router\ntitle: Router\n---\n\nThe router light is white.\n")
    (folder / "faqs.yaml").write_text(
        "faqs:\n  - id: faq-bill\n    question: When is my bill taken?\n    answer: On the 1st.\n"
    )
    clock = ManualClock(T0)
    daemon = KnowledgeStore(engine=store.engine, embedder=embedder, clock=clock, chroma_path=tmp_path / "chroma")
    await daemon.open()
    assert (await daemon.import_files([folder])).added == 2
    # `vigil kb import --prune` in another process: the same database and vector store, its own indexes.
    importer = await open_knowledge(store, tmp_path / "chroma", embedder)
    registry = CollectorRegistry()
    scheduler = Scheduler([refresh_job(daemon, 10.0)], clock=clock, registry=registry)
    await scheduler.start()

    async def found(query: str) -> set[str]:
        return {h.entry_id for h in await daemon.search(query, 5)}

    (folder / "router.md").write_text("---\nid: router\ntitle: Router\n---\n\nThe router light is turquoise.\n")
    (folder / "wifi.md").write_text("---\nid: wifi\ntitle: Wi-Fi\n---\n\nThe Wi-Fi password is on the sticker.\n")
    (folder / "faqs.yaml").write_text("faqs: []\n")
    report = await importer.import_files([folder], prune=True)
    assert (report.added, report.updated, report.removed) == (1, 1, 1)
    await scheduler.run_due(T0 + timedelta(seconds=9))
    assert "wifi" not in await found("wifi password sticker")  # not until the job's next window
    await scheduler.run_due(T0 + timedelta(seconds=10))
    assert "wifi" in await found("wifi password sticker")
    (hit,) = await daemon.search("turquoise light", 1)
    assert hit.entry_id == "router" and "turquoise" in hit.passage and hit.lexical > 0
    assert await daemon.match_faq("When is my bill taken?") is None
    # It keeps running for the next change.
    (folder / "router.md").write_text("---\nid: router\ntitle: Router\n---\n\nThe router light is amber.\n")
    await importer.import_files([folder / "router.md"])
    await scheduler.run_due(T0 + timedelta(seconds=20))
    (hit,) = await daemon.search("amber light", 1)
    assert hit.entry_id == "router" and "amber" in hit.passage
    ran = registry.get_sample_value("vigil_job_runs_total", {"job": REFRESH, "outcome": "ran"})
    assert ran == 2


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_the_refresh_job_switches_to_the_model_the_data_dir_names_and_skips_one_that_will_not_load(
    store: CaseStore, tmp_path: Path, embedder, caplog: pytest.LogCaptureFixture
):  # type: ignore[no-untyped-def]
    from tests.knowledge.test_store import Reversed, faq

    clock = ManualClock(T0)
    daemon = KnowledgeStore(engine=store.engine, embedder=embedder, clock=clock, chroma_path=tmp_path / "chroma")
    await daemon.open()
    await daemon.upsert([faq("faq-pay", "How do I pay?", ["pay my bill"])])
    wanted: list[Embedder] = [embedder]  # what the settings and the data dir's pointer choose, as the job asks
    scheduler = Scheduler(
        [refresh_job(daemon, 10.0, follow=lambda: wanted[-1])], clock=clock, registry=CollectorRegistry()
    )
    await scheduler.start()
    await scheduler.run_due(T0 + timedelta(seconds=10))
    assert daemon.embedder_name == "all-MiniLM-L6-v2"

    wanted.append(Reversed(embedder, "all-MiniLM-L6-v2-tuned-1"))  # a tuning run elsewhere was accepted
    await scheduler.run_due(T0 + timedelta(seconds=20))
    assert daemon.embedder_name == "all-MiniLM-L6-v2-tuned-1"
    match = await daemon.match_faq("pay my bill")
    assert match is not None and match.similarity > 0.99

    wanted.append(OnnxEmbedder(tmp_path / "a-model-since-deleted"))
    await scheduler.run_due(T0 + timedelta(seconds=30))
    await scheduler.run_due(T0 + timedelta(seconds=40))
    assert daemon.embedder_name == "all-MiniLM-L6-v2-tuned-1"  # still serving, and searches still work
    assert (await daemon.match_faq("pay my bill")) is not None
    refusals = [r for r in caplog.records if "cannot serve the model a-model-since-deleted" in r.getMessage()]
    assert len(refusals) == 1  # said once, not every few seconds
    await scheduler.stop()
    await daemon.close()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_tuning_window_that_finds_the_miner_at_work_does_nothing_and_says_why(
    store: CaseStore, caplog: pytest.LogCaptureFixture
):
    holder = Holder(owner="replica-2", until=T0 + timedelta(minutes=5))

    async def busy() -> Manifest:
        raise Busy(holder)

    clock = ManualClock(T0)
    scheduler = Scheduler([tune_job(busy, 3600.0)], clock=clock, registry=CollectorRegistry(), engine=store.engine)
    caplog.set_level(logging.INFO, logger="vigil.knowledge.jobs")
    await scheduler.start()
    await scheduler.run_due(T0 + timedelta(hours=1))
    await scheduler.stop()
    assert any("the miner's lease is held by replica-2" in r.getMessage() for r in caplog.records)
