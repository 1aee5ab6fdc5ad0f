"""The knowledge store on both databases with Chroma on disk and the real embedding model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import help_centre, open_knowledge
from vigil.documents import Entry, KnowledgeFileError
from vigil.knowledge import KnowledgeStore
from vigil.store import CaseStore

ROOT = Path(__file__).parent.parent


@pytest.fixture
async def knowledge(store: CaseStore, tmp_path: Path, embedder) -> AsyncIterator[KnowledgeStore]:  # type: ignore[no-untyped-def]
    yield await open_knowledge(store, tmp_path / "chroma", embedder)


def some_of_it() -> list[Entry]:
    """A few articles and the FAQs of one file: enough for tests that change the store."""
    entries = help_centre()
    articles = [e for e in entries if e.kind == "article"][:6]
    faqs = [e for e in entries if e.kind == "faq" and e.origin.endswith(".csv")]
    return articles + faqs + [e for e in entries if e.id in ("esim-setup", "faq-bill-date")]


async def test_import_is_idempotent_and_updates_what_changed(knowledge: KnowledgeStore):
    entries = some_of_it()
    first = await knowledge.upsert(entries)
    assert first.added == len(entries) and first.updated == first.unchanged == 0
    again = await knowledge.upsert(entries)
    assert (again.added, again.updated, again.unchanged) == (0, 0, len(entries))
    edited = [replace(e, body=e.body + " Updated.") if e.id == "faq-bill-date" else e for e in entries]
    third = await knowledge.upsert(edited)
    assert (third.added, third.updated) == (0, 1)
    stats = await knowledge.stats()
    assert stats["article"] == 7 and stats["faq"] == 9 and stats["passages"] > stats["article"] + stats["faq"]


async def test_prune_removes_entries_whose_source_no_longer_holds_them(knowledge: KnowledgeStore):
    entries = some_of_it()
    await knowledge.upsert(entries)
    origin = next(e.origin for e in entries if e.id == "faq-bill-date")
    kept = [e for e in entries if not (e.origin == origin and e.id == "faq-bill-date")]
    report = await knowledge.upsert(kept, prune_origins=[origin])
    assert report.removed == 1
    assert all(h.entry_id != "faq-bill-date" for h in await knowledge.search("when is my bill taken", 10))
    match = await knowledge.match_faq("when is my bill taken")
    assert match is not None and match.entry_id != "faq-bill-date"


async def test_search_finds_the_article_that_answers(knowledge: KnowledgeStore):
    await knowledge.upsert(help_centre())
    hits = await knowledge.search("how do I install an eSIM on my iPhone?", 5)
    assert hits[0].entry_id in ("esim-setup", "faq-esim-install")
    (article,) = await knowledge.search("how do I install an eSIM on my iPhone?", 1, kinds=["article"])
    assert article.entry_id == "esim-setup"
    assert "iPhone" in article.passage and article.dense > 0.4 and article.lexical > 0
    articles = await knowledge.search("roaming charges in Spain", 5, kinds=["article"])
    assert articles and all(h.kind == "article" for h in articles)
    assert {h.entry_id for h in articles} & {"roaming-europe", "world-pass"}


async def test_faq_match_uses_questions_and_alternates(knowledge: KnowledgeStore):
    await knowledge.upsert(help_centre())
    match = await knowledge.match_faq("wen do u take the money")
    assert match is not None and match.entry_id == "faq-bill-date" and match.margin > 0
    far = await knowledge.match_faq("my cat likes to sleep on the router")
    assert far is None or far.similarity < match.similarity


async def test_a_fresh_process_sees_the_knowledge_and_repairs_missing_vectors(
    store: CaseStore, tmp_path: Path, embedder
):  # type: ignore[no-untyped-def]
    first = await open_knowledge(store, tmp_path / "chroma", embedder)
    await first.upsert(some_of_it())
    # Another replica with an empty vector store (a Chroma volume lost): vectors are rebuilt from SQL.
    second = await open_knowledge(store, tmp_path / "other-chroma", embedder)  # open() repairs
    hits = await second.search("how do I install an eSIM on my iPhone?", 3, kinds=["article"])
    assert hits and hits[0].entry_id == "esim-setup"
    assert not await second.refresh_if_changed()
    await first.remove(["esim-setup"])
    assert await second.refresh_if_changed()
    assert all(h.entry_id != "esim-setup" for h in await second.search("install an eSIM", 5))


async def test_export_lists_every_entry(knowledge: KnowledgeStore):
    entries = some_of_it()
    await knowledge.upsert(entries)
    exported = await knowledge.export()
    assert [e["id"] for e in exported] == sorted(e.id for e in entries)
    assert exported[0]["provenance"]["origin"].endswith((".md", ".yaml", ".csv"))


async def test_import_files_loads_all_or_nothing(knowledge: KnowledgeStore, tmp_path: Path):
    good = tmp_path / "kb"
    good.mkdir()
    (good / "a.md").write_text("---\nid: a\ntitle: A\n---\n\nAlpha text.\n")
    (good / "faqs.yaml").write_text("faqs:\n  - id: faq-a\n    question: What is alpha?\n    answer: The first.\n")
    report = await knowledge.import_files([good])
    assert report.added == 2
    (good / "broken.csv").write_text("id,question\nx,y\n")
    with pytest.raises(KnowledgeFileError):
        await knowledge.import_files([good])
    (good / "broken.csv").unlink()
    (good / "faqs.yaml").write_text("faqs:\n  - id: faq-b\n    question: What is beta?\n    answer: The second.\n")
    report = await knowledge.import_files([good], prune=True)
    assert (report.added, report.removed, report.unchanged) == (1, 1, 1)
    assert {e["id"] for e in await knowledge.export()} == {"a", "faq-b"}
