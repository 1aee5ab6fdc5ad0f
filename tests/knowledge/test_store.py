"""The knowledge store on both databases with Chroma on disk and the real embedding model."""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psycopg
import pytest
import sqlalchemy as sa
from alembic import command

from tests.chroma import ChromaServer
from tests.conftest import PG_ADMIN, RememberingEmbedder, help_centre, make_settings, open_knowledge, views_of
from tests.knowledge.test_batching import Counting
from tests.panel.test_routes import USERS, bearer
from vigil.answers.settings import AnswerSettings
from vigil.answers.skill import AnswerSkill
from vigil.app.health import Health
from vigil.app.settings import Settings
from vigil.cases.store import CaseStore
from vigil.core.clock import SystemClock
from vigil.core.errors import KnowledgeError, KnowledgeUnavailable
from vigil.core.metrics import Metrics
from vigil.db.engine import create_engine
from vigil.db.migrate import alembic_config
from vigil.dev.broker import free_port
from vigil.flow.case import CaseState
from vigil.knowledge.documents import Entry, KnowledgeFileError, Passage
from vigil.knowledge.embedding import Embedder, Vectors
from vigil.knowledge.lexical import LexicalIndex
from vigil.knowledge.onnx_embedding import OnnxEmbedder
from vigil.knowledge.settings import KnowledgeSettings
from vigil.knowledge.store import (
    EntryConflict,
    KnowledgeStore,
    chroma_folder,
    model_collections,
    open_knowledge_store,
    standalone,
)
from vigil.knowledge.tables import ENTRY
from vigil.knowledge.vectors import VectorCollection, connect
from vigil.mining.candidates import proposed
from vigil.panel.overview import overview
from vigil.panel.settings import PanelSettings
from vigil.testing import panel_app
from vigil.wire.events import Message

ROOT = Path(__file__).parent.parent.parent


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


async def test_an_entrys_passages_are_read_from_memory_in_order_and_only_while_served(knowledge: KnowledgeStore):
    entries = some_of_it()
    await knowledge.upsert(entries)
    article = next(e for e in entries if e.kind == "article" and len(e.passages) > 1)
    assert knowledge.passages(article.id) == [(p.id, p.text) for p in sorted(article.passages, key=lambda p: p.id)]
    await knowledge.remove([article.id])
    assert knowledge.passages(article.id) == [] and knowledge.passages("no-such-entry") == []


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


async def test_a_text_embedded_again_soon_after_is_not_embedded_twice(
    store: CaseStore, tmp_path: Path, embedder: RememberingEmbedder
):
    # The answers' gate embeds a message the question rules reject; the answer skill then searches with it.
    counting = Counting(embedder)
    knowledge = await open_knowledge(store, tmp_path / "chroma", counting)
    counting.batches.clear()
    first = await knowledge.embed("Internet's completely down")
    again = await knowledge.embed("Internet's completely down")
    assert counting.batches == [["Internet's completely down"]]
    assert (first == again).all()


async def test_the_questions_of_concurrent_conversations_are_embedded_in_one_batch(
    store: CaseStore, tmp_path: Path, embedder: RememberingEmbedder
):
    counting = Counting(embedder)
    knowledge = await open_knowledge(store, tmp_path / "chroma", counting)
    await knowledge.upsert(some_of_it())
    counting.batches.clear()
    questions = ["how do I install an eSIM on my iPhone?", "when is my bill taken", "roaming charges in Spain"]
    searched = await asyncio.gather(*(knowledge.search(q, 3) for q in questions))
    assert all(searched)
    assert counting.batches == [questions]
    assert [h[0].entry_id for h in searched] == [(await knowledge.search(q, 1))[0].entry_id for q in questions]


async def test_the_vector_searches_of_concurrent_conversations_go_to_chroma_together(
    knowledge: KnowledgeStore, monkeypatch: pytest.MonkeyPatch
):
    # Chroma's cost is mostly per call: one call for a batch of query vectors instead of one call each.
    await knowledge.upsert(help_centre())
    questions = ["how do I install an eSIM on my iPhone?", "when is my bill taken", "roaming charges in Spain"]
    vectors = [await knowledge.embed(q) for q in questions]
    alone = [await knowledge.search(q, 3, vector=v) for q, v in zip(questions, vectors, strict=True)]
    faqs_alone = [await knowledge.match_faq(q, vector=v) for q, v in zip(questions, vectors, strict=True)]
    calls: list[int] = []
    real_query = VectorCollection.query

    def counting(self: VectorCollection, batch: np.ndarray, k: int, where: Any = None) -> Any:
        calls.append(len(batch))
        return real_query(self, batch, k, where)

    monkeypatch.setattr(VectorCollection, "query", counting)
    together = await asyncio.gather(
        *(knowledge.search(q, 3, vector=v) for q, v in zip(questions, vectors, strict=True))
    )
    assert calls == [3, 3]  # one call per collection (passages, FAQ questions), each with the three queries
    assert together == alone
    calls.clear()
    faqs = await asyncio.gather(*(knowledge.match_faq(q, vector=v) for q, v in zip(questions, vectors, strict=True)))
    assert calls == [3] and faqs == faqs_alone
    assert faqs[1] is not None and faqs[1].entry_id == "faq-bill-date"


async def test_many_texts_embedded_in_parallel_calls_come_back_in_order_and_the_same(knowledge: KnowledgeStore):
    texts = [f"my parcel number {n} never arrived" if n % 2 else f"how do I reset hub {n}?" for n in range(9)]
    one = await knowledge.embed_many(texts)
    for parallel in (2, 3, 8):
        assert np.allclose(await knowledge.embed_many(texts, parallel=parallel), one, atol=1e-5)


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


async def test_search_puts_the_entry_whose_telling_words_match_before_the_near_miss(knowledge: KnowledgeStore):
    await knowledge.upsert(help_centre())
    # A customer's words, not an FAQ question or alternate: steady (solid), not blinking (flashing).
    hits = await knowledge.search("my router has a steady orange light that isn't blinking, and no internet", 5)
    assert hits[0].entry_id in {"faq-hub-solid-amber", "no-internet-amber-light"}
    flashing = next(h for h in hits if h.entry_id == "faq-hub-flashing-amber")
    # The near miss is found, by its questions too, but the words that tell it from the first side against it.
    assert flashing.question > 0.4 and flashing.agreement < 0 < hits[0].agreement


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


async def test_an_imported_entry_is_served_until_its_expiry_and_a_new_expiry_in_its_file_serves_it_again(
    knowledge: KnowledgeStore, tmp_path: Path
):
    kb = tmp_path / "kb"
    kb.mkdir()
    offer = "---\nid: winter-offer\ntitle: Winter offer\nexpires: {}\n---\n\nHalf price fibre for three months.\n"
    (kb / "offer.md").write_text(offer.format("2020-01-01"))
    await knowledge.import_files([kb])
    [exported] = await knowledge.export()
    assert exported["expires_at"].startswith("2020-01-01T00:00:00")
    assert not await knowledge.search("is there a half price fibre offer?", 3)
    (kb / "offer.md").write_text(offer.format("2999-01-01"))
    assert (await knowledge.import_files([kb])).updated == 1
    assert [h.entry_id for h in await knowledge.search("is there a half price fibre offer?", 3)] == ["winter-offer"]


# --- Question vectors: exactly the ones stored for an entry, deleted on update and repaired (issue 8, item 13) ---


def questions_in_chroma(path: Path) -> dict[str, str]:
    """Every question vector in the Chroma store at ``path``: its id and the entry it belongs to, read from Chroma
    itself rather than through the knowledge store."""
    found = connect(path=path, url=None).get_collection("vigil-questions").get(include=["metadatas"])
    return {item: str(meta["entry_id"]) for item, meta in zip(found["ids"], found["metadatas"], strict=True)}


def faq(entry_id: str, question: str, alternates: Sequence[str]) -> Entry:
    return Entry(
        id=entry_id,
        kind="faq",
        title=question,
        body=f"The answer to {question}",
        origin="test",
        questions=(question, *alternates),
        passages=(Passage(id=f"{entry_id}#1", heading=None, text=question),),
    )


async def test_an_faq_updated_to_fewer_alternates_leaves_no_stale_question_vectors(
    knowledge: KnowledgeStore, tmp_path: Path
):
    many = [f"how do I pay bill number {n}" for n in range(70)]  # more than the 64 the old code deleted
    await knowledge.upsert([faq("faq-pay", "How do I pay?", many), faq("faq-other", "Where is my parcel?", [])])
    assert len([q for q, e in questions_in_chroma(tmp_path / "chroma").items() if e == "faq-pay"]) == 71

    await knowledge.upsert(
        [faq("faq-pay", "How do I pay?", ["pay my bill", "paying"]), faq("faq-other", "Where is my parcel?", [])]
    )
    stored = questions_in_chroma(tmp_path / "chroma")
    assert sorted(q for q, e in stored.items() if e == "faq-pay") == ["faq-pay?0", "faq-pay?1", "faq-pay?2"]
    assert [q for q, e in stored.items() if e == "faq-other"] == ["faq-other?0"]
    match = await knowledge.match_faq("how do I pay bill number 69")
    assert match is not None and match.entry_id == "faq-pay"  # still found by what it still holds

    assert await knowledge.remove(["faq-pay"]) == 1
    assert set(questions_in_chroma(tmp_path / "chroma")) == {"faq-other?0"}


class Reversed:
    """The real model with its dimensions reversed: another model as far as vectors go (one's vector compared with
    the other's is noise), whose vectors agree among themselves as the real model's do."""

    def __init__(self, model: Embedder, name: str) -> None:
        self._model = model
        self.name = name
        self.dimensions = model.dimensions

    def load(self) -> None:
        self._model.load()

    def embed(self, texts: Sequence[str]) -> Vectors:
        return np.ascontiguousarray(self._model.embed(texts)[:, ::-1])


def collections_in_chroma(path: Path) -> set[str]:
    return {getattr(c, "name", c) for c in connect(path=path, url=None).list_collections()}


async def test_a_new_model_serves_from_vectors_of_its_own_and_never_compares_across_models(
    store: CaseStore, knowledge: KnowledgeStore, tmp_path: Path, embedder
):  # type: ignore[no-untyped-def]
    await knowledge.upsert([faq("faq-pay", "How do I pay?", ["pay my bill"]), faq("faq-late", "My parcel is late", [])])
    before = await knowledge.embed("How do I pay?")
    shipped = {"vigil-passages", "vigil-questions"}
    assert collections_in_chroma(tmp_path / "chroma") == shipped

    assert await knowledge.use_model(Reversed(embedder, "all-MiniLM-L6-v2-tuned-1"))
    assert knowledge.embedder_name == "all-MiniLM-L6-v2-tuned-1"
    made = collections_in_chroma(tmp_path / "chroma") - shipped
    assert made == set(model_collections("vigil", "all-MiniLM-L6-v2-tuned-1"))
    # A vector embedded before the switch is not compared with the new model's vectors: the question is embedded anew.
    match = await knowledge.match_faq("How do I pay?", vector=before)
    assert match is not None and match.entry_id == "faq-pay" and match.similarity > 0.99
    # What is written from now on is embedded by the new model, into its collections.
    await knowledge.upsert([faq("faq-move", "I am moving house", ["new address"])])
    moved = await knowledge.match_faq("new address")
    assert moved is not None and moved.entry_id == "faq-move" and moved.similarity > 0.99
    assert not await knowledge.use_model(Reversed(embedder, "all-MiniLM-L6-v2-tuned-1"))  # serving it already

    # A restart on the new model drops the old model's collections (embedded Chroma is this process's alone); back on
    # the shipped one, its collections are made afresh and hold what changed meanwhile.
    await knowledge.close()
    reopened = await open_knowledge(store, tmp_path / "chroma", Reversed(embedder, "all-MiniLM-L6-v2-tuned-1"))
    assert collections_in_chroma(tmp_path / "chroma") == made
    assert await reopened.use_model(embedder)
    moved = await reopened.match_faq("new address")
    assert moved is not None and moved.entry_id == "faq-move" and moved.similarity > 0.99
    await reopened.close()


async def test_repair_re_embeds_a_vector_made_from_content_the_entry_no_longer_has(
    knowledge: KnowledgeStore, tmp_path: Path, embedder
):  # type: ignore[no-untyped-def]
    # As a process on another model leaves it: the entry changed in SQL, this model's vector of it did not.
    await knowledge.upsert([faq("faq-pay", "How do I pay?", [])])
    collection = VectorCollection(connect(path=tmp_path / "chroma", url=None), "vigil-passages")
    digest = collection.get(["faq-pay#1"])["faq-pay#1"]["digest"]
    collection.upsert(
        ["faq-pay#1"], embedder.embed(["my parcel is late"]), [{"entry_id": "faq-pay", "tenant": "", "digest": "old"}]
    )
    await knowledge.refresh()
    assert collection.get(["faq-pay#1"])["faq-pay#1"]["digest"] == digest
    (hit,) = await knowledge.search("How do I pay?", 1)
    assert hit.entry_id == "faq-pay" and hit.dense > 0.99


async def test_repair_restores_missing_question_vectors_and_removes_strays(
    store: CaseStore, knowledge: KnowledgeStore, tmp_path: Path, embedder
):  # type: ignore[no-untyped-def]
    await knowledge.upsert([faq("faq-pay", "How do I pay?", ["pay my bill", "settle my account"])])
    expected = questions_in_chroma(tmp_path / "chroma")
    assert set(expected) == {"faq-pay?0", "faq-pay?1", "faq-pay?2"}
    # By hand, behind the store's back: two vectors lost, and one left over from an entry SQL no longer holds.
    collection = VectorCollection(connect(path=tmp_path / "chroma", url=None), "vigil-questions")
    collection.delete(["faq-pay?1", "faq-pay?2"])
    collection.upsert(["faq-gone?0"], embedder.embed(["an old question"]), [{"entry_id": "faq-gone", "tenant": ""}])

    await open_knowledge(store, tmp_path / "chroma", embedder)  # a restart: open() repairs
    assert questions_in_chroma(tmp_path / "chroma") == expected
    match = await knowledge.match_faq("settle my account")
    assert match is not None and match.entry_id == "faq-pay" and match.similarity > 0.99


# --- Tenants: an entry of one tenant is searched, shown and counted for that tenant only (issue 8, item 14) ---

TENANT_FILES = {
    "router.md": "---\nid: router-lights\ntitle: The router's lights\n---\n\nSolid white means online. "
    "A refund for a faulty router is made to your card.\n",
    "acme-refunds.md": "---\nid: acme-refunds\ntitle: Acme refunds\ntenant: acme\n---\n\n"
    "A refund takes 5 working days to reach the card you paid with.\n",
    "globex-refunds.md": "---\nid: globex-refunds\ntitle: Globex refunds\ntenant: globex\n---\n\n"
    "A refund takes 10 working days and is sent by cheque.\n",
    "globex.yaml": "tenant: globex\nfaqs:\n  - id: faq-globex-refund\n    question: How long does a refund take?\n"
    "    answer: Ten working days, by cheque.\n",
    "acme.csv": "id,question,answer,alternates,tenant\n"
    "faq-acme-refund,When will I get my refund?,Within 5 working days.,how long for a refund,acme\n",
    "global.yaml": "faqs:\n  - id: faq-password\n    question: How do I reset my password?\n"
    "    answer: Use the link on the sign-in page.\n",
}


@pytest.fixture
async def tenanted(knowledge: KnowledgeStore, tmp_path: Path) -> KnowledgeStore:
    folder = tmp_path / "kb"
    folder.mkdir()
    for name, text in TENANT_FILES.items():
        (folder / name).write_text(text)
    assert (await knowledge.import_files([folder])).added == 6
    return knowledge


async def test_an_import_cannot_take_another_tenants_entry_by_its_id(tenanted: KnowledgeStore, tmp_path: Path):
    # Globex's help centre happens to use the id Acme's article has; and so does a file for every tenant.
    for name, text in (
        ("globex-too.md", "---\nid: acme-refunds\ntitle: Refunds\ntenant: globex\n---\n\nBy cheque, in 10 days.\n"),
        ("everyone.md", "---\nid: acme-refunds\ntitle: Refunds\n---\n\nRefunds take a while.\n"),
    ):
        other = tmp_path / name
        other.write_text(text)
        with pytest.raises(EntryConflict, match=r"acme-refunds.*already.*tenant 'acme'"):
            await tenanted.import_files([other])
    hits = await tenanted.search("How long does a refund take?", 10, tenant="acme")
    assert "acme-refunds" in [h.entry_id for h in hits]  # still Acme's, with Acme's text
    # Its own file may move it (here: to every tenant).
    own = tmp_path / "kb" / "acme-refunds.md"
    own.write_text(own.read_text().replace("tenant: acme\n", ""))
    assert (await tenanted.import_files([own])).updated == 1
    assert "acme-refunds" in [h.entry_id for h in await tenanted.search("How long does a refund take?", 10)]


def owner(entry_id: str) -> str | None:
    return entry_id.split("-")[1] if entry_id.split("-")[1] in ("acme", "globex") else None


async def test_retrieval_for_a_tenant_sees_global_entries_and_its_own_never_another_tenants(
    tenanted: KnowledgeStore,
):
    question = "How long does a refund take?"
    for tenant, other in (("acme", "globex"), ("globex", "acme")):
        hits = await tenanted.search(question, 10, tenant=tenant)
        assert {owner(h.entry_id) for h in hits} == {None, tenant}, hits
        assert f"{tenant}-refunds" in [h.entry_id for h in hits]
        assert all(other not in h.entry_id for h in hits)
    # Globex's FAQ is the question word for word, and wins for Globex; Acme never sees it.
    globex = await tenanted.match_faq(question, tenant="globex")
    assert globex is not None and globex.entry_id == "faq-globex-refund" and globex.similarity > 0.99
    acme = await tenanted.match_faq(question, tenant="acme")
    assert acme is not None and acme.entry_id == "faq-acme-refund"
    # Without a tenant, only the global entries.
    assert {owner(h.entry_id) for h in await tenanted.search(question, 10)} == {None}
    nobody = await tenanted.match_faq(question)
    assert nobody is not None and nobody.entry_id == "faq-password"


async def test_the_cross_validated_ranking_keeps_to_the_tenants_entries_too(
    tenanted: KnowledgeStore, store: CaseStore, tmp_path: Path, embedder: RememberingEmbedder
):
    # VIGIL_KNOWLEDGE__RANKING=cross_validated: each sentence searched too, and a ranking of titles ("Globex
    # refunds" names the other tenant), over the same knowledge.
    settings = KnowledgeSettings(ranking="cross_validated")
    ranked = open_knowledge_store(
        settings, store.engine, data_dir=tmp_path, clock=SystemClock(), timeout_s=5.0, embedder=embedder
    )
    await ranked.open()
    try:
        for tenant, other in (("acme", "globex"), ("globex", "acme")):
            question = f"Hello. How long does a refund take? Is it like the {other.title()} refunds?"
            hits = await ranked.search(question, 10, tenant=tenant)
            assert {owner(h.entry_id) for h in hits} == {None, tenant}, hits
            assert hits[0].entry_id in (f"{tenant}-refunds", f"faq-{tenant}-refund")
        assert {owner(h.entry_id) for h in await ranked.search("Globex refunds. Acme refunds.", 10)} == {None}
    finally:
        await ranked.close()


async def test_the_cross_validated_ranking_prefers_an_entry_that_several_passages_and_sentences_match(
    store: CaseStore, tmp_path: Path, embedder: RememberingEmbedder
):
    # A long message: the request in its last sentences. The hybrid answers from the FAQ (one passage); the
    # cross-validated ranking sums an entry's three best passages, and the eSIM article has several that match.
    message = (
        "Hi. I ordered the eSIM yesterday evening. The email arrived with a QR code. My phone froze halfway "
        "through scanning it and now it says the code is invalid."
    )
    firsts, short = {}, {}
    for ranking in ("hybrid", "cross_validated", "adaptive"):
        knowledge = open_knowledge_store(
            KnowledgeSettings(ranking=ranking),  # type: ignore[arg-type]
            store.engine,
            data_dir=tmp_path / ranking,
            clock=SystemClock(),
            timeout_s=5.0,
            embedder=embedder,
        )
        await knowledge.open()
        try:
            if ranking == "hybrid":
                await knowledge.upsert(help_centre())
            firsts[ranking] = (await knowledge.search(message, 5))[0].entry_id
            short[ranking] = [h.entry_id for h in await knowledge.search("my esim code says invalid, why?", 5)]
        finally:
            await knowledge.close()
    # The adaptive ranking reads a message of three sentences or more as the cross-validated one does, and a short
    # one as the hybrid does.
    assert firsts == {"hybrid": "faq-esim-code-invalid", "cross_validated": "esim-setup", "adaptive": "esim-setup"}
    assert short["adaptive"] == short["hybrid"]


async def test_the_answer_skill_answers_a_conversation_from_its_tenants_knowledge(tenanted: KnowledgeStore):
    skill = AnswerSkill(tenanted, AnswerSettings())
    for tenant, other in (("acme", "globex"), ("globex", "acme")):
        message = Message.model_validate(
            {
                "type": "message",
                "schema_version": 1,
                "message_id": "m1",
                "conversation_id": "c1",
                "tenant": tenant,
                "sent_at": datetime.now(UTC),
                "role": "customer",
                "text": "How long does a refund take?",
            }
        )
        case = CaseState("c1", tenant, "open", None, None, message.sent_at, message.sent_at, None, 1)
        proposals = await skill.propose(message, case)
        assert proposals and all(other not in s.id for p in proposals for s in p.sources)
        assert any(tenant in s.id for p in proposals for s in p.sources)


async def test_chroma_filters_by_tenant_only_when_the_store_holds_another_tenants_entries(
    knowledge: KnowledgeStore, monkeypatch: pytest.MonkeyPatch
):
    # Chroma filters by scanning every vector's metadata (~60 ms a query at 30,000 passages, against ~1.5 ms for the
    # nearest neighbours alone): a filter that would keep every vector is not sent.
    filters: list[Any] = []
    real_query = VectorCollection.query

    def recording(self: VectorCollection, batch: np.ndarray, k: int, where: Any = None) -> Any:
        filters.append(where)
        return real_query(self, batch, k, where)

    monkeypatch.setattr(VectorCollection, "query", recording)
    await knowledge.upsert(help_centre())
    await knowledge.search("how do I install an eSIM on my iPhone?", 3, tenant="acme")
    await knowledge.match_faq("wen do u take the money", tenant="acme")
    assert filters and all(where is None for where in filters)
    filters.clear()
    await knowledge.search("roaming charges in Spain", 3, kinds=["article"], tenant="acme")
    assert filters[0] is not None  # a kind is asked for: Chroma keeps to it
    own = Entry(id="globex-only", kind="article", title="T", body="b", origin="t", tenant="globex", passages=())
    await knowledge.upsert([own])
    filters.clear()
    await knowledge.search("how do I install an eSIM on my iPhone?", 3, tenant="acme")
    assert filters and all(where is not None for where in filters)
    filters.clear()
    await knowledge.search("how do I install an eSIM on my iPhone?", 3, tenant="globex")
    assert filters and all(where is None for where in filters)  # Globex sees every entry there is


async def test_another_tenants_entries_never_crowd_a_tenants_candidates_out(knowledge: KnowledgeStore):
    # 60 Globex passages nearer to the question than the one global article: more than the candidates each
    # ranking takes. Acme's search still finds the global article on both rankings (filtered before the top k).
    crowd = [
        Entry(
            id=f"globex-{n}",
            kind="document",
            title="Refunds",
            body="b",
            origin="t",
            tenant="globex",
            passages=(Passage(f"globex-{n}#1", None, f"How long does a refund take? It takes {n} days."),),
        )
        for n in range(60)
    ]
    article = Entry(
        id="refund-times",
        kind="article",
        title="Money back",
        body="b",
        origin="t",
        passages=(Passage("refund-times#1", None, "Money back: a refund reaches your bank soon."),),
    )
    await knowledge.upsert([*crowd, article])
    (hit,) = await knowledge.search("How long does a refund take?", 1, tenant="acme")
    assert hit.entry_id == "refund-times" and hit.dense > 0 and hit.lexical > 0
    assert (await knowledge.search("How long does a refund take?", 1, tenant="globex"))[0].entry_id != "refund-times"


def test_the_lexical_mask_keeps_out_what_a_tenant_may_not_see():
    index = LexicalIndex(["b#1", "g#1"], ["a refund takes ten days", "refund"])
    assert [h.passage_id for h in index.search("refund takes ten days", 1)] == ["b#1"]
    assert [h.passage_id for h in index.search("refund takes ten days", 1, only=np.array([0.0, 1.0]))] == ["g#1"]


async def test_counts_are_per_tenant_where_asked(tenanted: KnowledgeStore, store: CaseStore):
    assert await tenanted.stats() == {"article": 3, "faq": 3, "passages": 6}
    assert await tenanted.stats(["acme"]) == {"article": 2, "faq": 2, "passages": 4}
    assert await tenanted.stats(["acme", "globex"]) == await tenanted.stats()
    now = datetime.now(UTC)
    lead = await overview(
        views_of(store),
        tenants=["globex"],
        since=now - timedelta(hours=1),
        until=now + timedelta(minutes=1),
        bucket_s=3600,
    )
    assert lead.totals.knowledge == {"article": 2, "faq": 2}
    admin = await overview(
        views_of(store), tenants=None, since=now - timedelta(hours=1), until=now + timedelta(minutes=1), bucket_s=3600
    )
    assert admin.totals.knowledge == {"article": 3, "faq": 3}


async def test_the_knowledge_page_of_another_tenants_entry_is_not_found(
    tenanted: KnowledgeStore, store: CaseStore, registry
):  # type: ignore[no-untyped-def]
    metrics = Metrics(registry)
    app = panel_app(
        views=views_of(store),
        health=Health({}, clock=SystemClock(), metrics=metrics, interval_s=1),
        metrics=metrics,
        knowledge=tenanted,
        panel=PanelSettings(auth="tokens", users=USERS),
    )
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://vigil.test") as client:

        async def status(who: str, entry_id: str) -> int:
            return (await client.get(f"/panel/knowledge/{entry_id}", headers=bearer(who))).status_code

        # ana sees acme, lee sees globex, root sees every tenant.
        assert [await status("ana", e) for e in ("router-lights", "acme-refunds", "globex-refunds")] == [200, 200, 404]
        assert [await status("lee", e) for e in ("router-lights", "acme-refunds", "faq-globex-refund")] == [
            200,
            404,
            200,
        ]
        assert [await status("root", e) for e in ("acme-refunds", "globex-refunds")] == [200, 200]
        page = await client.get("/panel/knowledge/acme-refunds", headers=bearer("ana"))
        assert "5 working days" in page.text and 'For tenant <span class="mono">acme</span> only' in page.text
        assert "For every tenant" in (await client.get("/panel/knowledge/router-lights", headers=bearer("ana"))).text
        refused = await client.get("/panel/knowledge/globex-refunds", headers=bearer("ana"))
        assert "cheque" not in refused.text


# --- Chroma in server mode (VIGIL_KNOWLEDGE__CHROMA_URL), against a real `chroma run` ---


@pytest.fixture
def chroma_server(chroma: ChromaServer) -> str:
    """The URL of a running Chroma server."""
    return chroma.url


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_the_knowledge_store_imports_and_searches_through_a_chroma_server(
    store: CaseStore,
    tmp_path: Path,
    embedder,
    chroma_server: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
):  # type: ignore[no-untyped-def]
    folder = tmp_path / "kb"
    folder.mkdir()
    for name, text in TENANT_FILES.items():
        (folder / name).write_text(text)
    monkeypatch.setenv("VIGIL_KNOWLEDGE__CHROMA_URL", chroma_server)
    settings = Settings(_env_file=None, data_dir=tmp_path / "data")  # type: ignore[call-arg]
    assert settings.knowledge.chroma_url == chroma_server

    def replica() -> KnowledgeStore:  # as open_knowledge_store builds it, with the session's loaded model
        return KnowledgeStore(
            engine=store.engine,
            embedder=embedder,
            clock=SystemClock(),
            chroma_path=settings.data_dir / "chroma",
            chroma_url=settings.knowledge.chroma_url,
        )

    first = replica()
    await first.open()
    assert (await first.import_files([folder])).added == 6
    hits = await first.search("How long does a refund take?", 10, tenant="acme")
    assert "acme-refunds" in [h.entry_id for h in hits] and all("globex" not in h.entry_id for h in hits)
    assert hits[0].dense > 0  # found by the vectors held by the server
    match = await first.match_faq("How long does a refund take?", tenant="globex")
    assert match is not None and match.entry_id == "faq-globex-refund"
    assert not (settings.data_dir / "chroma").exists()  # nothing was written to an embedded Chroma

    # A second replica on the same server and database finds every vector there: nothing to re-embed.
    caplog.set_level(logging.WARNING, logger="vigil.knowledge.store")
    second = replica()
    await second.open()
    assert not [r for r in caplog.records if "re-embedding" in r.getMessage()]
    (hit,) = await second.search("How long does a refund take?", 1, tenant="globex", kinds=["article"])
    assert hit.entry_id == "globex-refunds" and hit.dense > 0


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
async def test_an_import_a_mined_entry_its_approval_and_a_retirement_on_one_replica_reach_another_at_its_refresh(
    store: CaseStore, tmp_path: Path, embedder, chroma_server: str
):  # type: ignore[no-untyped-def]
    def replica(name: str) -> KnowledgeStore:  # each with its own data folder; the database and Chroma shared
        return KnowledgeStore(
            engine=store.engine,
            embedder=embedder,
            clock=SystemClock(),
            chroma_path=tmp_path / name / "chroma",
            chroma_url=chroma_server,
        )

    async def served_by_other(query: str) -> list[str]:
        """What the other replica answers ``query`` with after its refresh (the scheduled job's step)."""
        await other.refresh_if_changed()
        return [h.entry_id for h in await other.search(query, 5)]

    one, other = replica("vigil-0"), replica("vigil-1")
    await one.open()
    await other.open()
    await one.upsert(some_of_it())  # an import
    assert (await served_by_other("how do I install an eSIM on my iPhone?"))[0] == "esim-setup"

    entry, governance = proposed(
        entry_id="mined-pause-direct-debit",
        origin="mined:case-1",
        tenant="default",
        conversation_id="case-1",
        question="Can I pause my direct debit while I am abroad for three months?",
        answer="Yes: a lead can pause the direct debit for up to three months from the billing page.",
        disagrees_with=[],
        source={"case": "case-1"},
    )
    entry = replace(entry, tenant=None)
    await one.upsert([entry], governance={entry.id: governance})  # mined: waiting for review, served by none
    question = "pause my direct debit while abroad for three months"
    assert entry.id not in await served_by_other(question)
    assert await one.govern(entry.id, status="active")  # a lead approves it through the first replica
    assert (await served_by_other(question))[0] == entry.id
    assert await one.govern(entry.id, status="retired")  # and later retires it
    assert entry.id not in await served_by_other(question)


async def test_knowledge_stored_before_tenants_is_global_and_repaired_at_start(
    store: CaseStore, knowledge: KnowledgeStore, tmp_path: Path, embedder
):  # type: ignore[no-untyped-def]
    await knowledge.upsert([faq("faq-pay", "How do I pay?", ["pay my bill"])])
    # As the previous version left it: no recorded question vectors, and vectors without a tenant.
    async with store.engine.begin() as conn:
        await conn.execute(sa.update(ENTRY).values(question_vectors=None))
    client = connect(path=tmp_path / "chroma", url=None)
    for name, ids, metadata in (
        ("vigil-passages", ["faq-pay#1"], {"entry_id": "faq-pay", "kind": "faq"}),
        ("vigil-questions", ["faq-pay?0", "faq-pay?1"], {"entry_id": "faq-pay"}),
    ):
        collection = client.get_collection(name)
        collection.delete(ids=ids)
        collection.add(
            ids=ids, embeddings=embedder.embed(["How do I pay?"] * len(ids)), metadatas=[metadata] * len(ids)
        )

    reopened = await open_knowledge(store, tmp_path / "chroma", embedder)  # what a start after the upgrade does
    match = await reopened.match_faq("pay my bill", tenant="acme")
    assert match is not None and match.entry_id == "faq-pay" and match.similarity > 0.99
    assert [h.entry_id for h in await reopened.search("How do I pay?", 1, tenant="acme")] == ["faq-pay"]
    await reopened.upsert([faq("faq-pay", "How do I pay?", [])])  # the unrecorded vectors are still found
    assert set(questions_in_chroma(tmp_path / "chroma")) == {"faq-pay?0"}


def _downgrade_to_0004(connection: sa.Connection) -> None:
    command.downgrade(alembic_config(connection), "0004")


async def test_migration_0006_keeps_existing_entries_global(store: CaseStore, tmp_path: Path, embedder):  # type: ignore[no-untyped-def]
    async with store.engine.begin() as conn:
        await conn.run_sync(_downgrade_to_0004)
        columns = await conn.run_sync(lambda c: {col["name"] for col in sa.inspect(c).get_columns("knowledge_entry")})
        assert "tenant" not in columns
        now = datetime.now(UTC)
        await conn.execute(
            sa.text(
                "INSERT INTO knowledge_entry (id, kind, title, body, origin, tags, url, product, questions, digest,"
                " status, confidence, provenance, created_at, updated_at) VALUES ('faq-old', 'faq', 'How do I pay?',"
                " 'By card.', 'old.yaml', '[]', NULL, NULL, '[\"How do I pay?\", \"pay my bill\"]', 'd', 'active', 1.0,"
                " NULL, :now, :now)"
            ),
            {"now": now},
        )
        await conn.execute(
            sa.text(
                "INSERT INTO knowledge_passage (id, entry_id, position, heading, text)"
                " VALUES ('faq-old#1', 'faq-old', 0, NULL, 'How do I pay?\nBy card.')"
            )
        )
    await store.migrate()
    knowledge = await open_knowledge(store, tmp_path / "chroma", embedder)  # no vectors yet: repair embeds them
    assert (await knowledge.export())[0]["tenant"] is None
    for tenant in (None, "acme", "globex"):
        match = await knowledge.match_faq("pay my bill", tenant=tenant)
        assert match is not None and match.entry_id == "faq-old"
    assert await knowledge.stats(["acme"]) == {"faq": 1, "passages": 1}


# --- `vigil kb search`: each call is a fresh process on the knowledge another command imported ---


async def test_a_search_in_a_fresh_process_embeds_only_the_query(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    settings = make_settings(tmp_path=tmp_path)
    async with standalone(
        settings.knowledge, settings.database, data_dir=settings.data_dir
    ) as importing:  # `vigil kb import`
        await importing.upsert(some_of_it())
    embedded: list[str] = []
    real_embed = OnnxEmbedder.embed

    def recording(self: OnnxEmbedder, texts: Sequence[str]) -> Vectors:
        embedded.extend(texts)
        return real_embed(self, texts)

    monkeypatch.setattr(OnnxEmbedder, "embed", recording)
    for query in ("how do I install an eSIM on my iPhone?", "when is my bill taken"):
        async with standalone(
            settings.knowledge, settings.database, data_dir=settings.data_dir
        ) as searching:  # `vigil kb search QUERY`, one process each
            hits = await searching.search(query, 3)
        assert hits
    # The passages' vectors come from Chroma on disk: nothing but the two questions was embedded.
    assert embedded == ["how do I install an eSIM on my iPhone?", "when is my bill taken"]


async def test_a_one_off_command_lets_go_of_chroma_so_its_folder_can_be_removed_and_made_afresh(tmp_path: Path):
    settings = make_settings(tmp_path=tmp_path)
    async with standalone(settings.knowledge, settings.database, data_dir=settings.data_dir) as first:
        await first.upsert(some_of_it())
    shutil.rmtree(chroma_folder(settings.data_dir))  # an operator starting the vectors afresh
    async with standalone(settings.knowledge, settings.database, data_dir=settings.data_dir) as second:
        await second.check()
        hits = await second.search("How do I install an eSIM?", 3, kinds=["article"])  # repaired from SQL
    assert hits[0].entry_id == "esim-setup" and hits[0].dense > 0


# --- The error boundary: Chroma's and the database's errors come out as KnowledgeError / KnowledgeUnavailable ---


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_chroma_server_that_stops_makes_the_knowledge_unavailable_until_it_is_back(
    store: CaseStore, tmp_path: Path, embedder, chroma: ChromaServer
):  # type: ignore[no-untyped-def]
    knowledge = KnowledgeStore(
        engine=store.engine,
        embedder=embedder,
        clock=SystemClock(),
        chroma_path=tmp_path / "chroma",
        chroma_url=chroma.url,
        timeout_s=5,
    )
    await knowledge.open()
    await knowledge.upsert(some_of_it())
    await knowledge.check()

    chroma.stop()
    with pytest.raises(KnowledgeUnavailable, match="Chroma") as caught:
        await knowledge.search("How do I install an eSIM?", 3)
    assert caught.value.__cause__ is not None  # translated `from` Chroma's own error
    with pytest.raises(KnowledgeUnavailable):
        await knowledge.match_faq("when is my bill taken")
    with pytest.raises(KnowledgeUnavailable):
        await knowledge.check()
    with pytest.raises(KnowledgeUnavailable):
        await knowledge.upsert([replace(e, body=e.body + " Updated.") for e in some_of_it()])
    with pytest.raises(KnowledgeUnavailable):
        await KnowledgeStore(
            engine=store.engine, embedder=embedder, clock=SystemClock(), chroma_path=tmp_path, chroma_url=chroma.url
        ).open()  # a replica starting meanwhile is told to retry, not that the URL is wrong

    chroma.start()
    await knowledge.check()
    hits = await knowledge.search("How do I install an eSIM?", 3, kinds=["article"])
    assert hits[0].entry_id == "esim-setup" and hits[0].dense > 0


async def test_embedded_chromas_folder_removed_mid_run_fails_the_check_and_imports_as_unavailable(
    knowledge: KnowledgeStore, tmp_path: Path
):
    await knowledge.upsert(some_of_it()[:2])
    await knowledge.check()
    shutil.rmtree(tmp_path / "chroma")
    with pytest.raises(KnowledgeUnavailable, match="gone"):
        await knowledge.check()
    with pytest.raises(KnowledgeUnavailable, match="Chroma failed storing vectors") as caught:
        await knowledge.upsert(some_of_it())
    assert caught.value.__cause__ is not None
    assert (await knowledge.stats())["article"] == 2  # nothing half-imported: SQL is written after the vectors


# A trigger on the knowledge tables that raises whatever SQLSTATE the test puts in ``knowledge_fault``, quoting the
# passage's text, as PostgreSQL's own data errors quote the values they refuse.
KNOWLEDGE_FAULT = (
    "CREATE TABLE knowledge_fault (code text NOT NULL)",
    """CREATE FUNCTION raise_knowledge_fault() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE wanted text;
    BEGIN
      SELECT code INTO wanted FROM knowledge_fault LIMIT 1;
      IF wanted IS NOT NULL THEN
        RAISE EXCEPTION 'injected % on %', wanted, NEW.text USING ERRCODE = wanted;
      END IF;
      RETURN NEW;
    END $$""",
    "CREATE TRIGGER knowledge_fault BEFORE INSERT ON knowledge_passage FOR EACH ROW EXECUTE FUNCTION "
    "raise_knowledge_fault()",
)


async def knowledge_fault(store: CaseStore, code: str | None) -> None:
    async with store.engine.begin() as conn:
        if not await conn.scalar(sa.text("SELECT to_regclass('knowledge_fault') IS NOT NULL")):
            for statement in KNOWLEDGE_FAULT:
                await conn.exec_driver_sql(statement)
        await conn.exec_driver_sql("DELETE FROM knowledge_fault")
        if code is not None:
            await conn.execute(sa.text("INSERT INTO knowledge_fault VALUES (:code)"), {"code": code})


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
@pytest.mark.parametrize(
    ("code", "unavailable"), [("40P01", True), ("57014", True), ("23514", False), ("22001", False)]
)
async def test_a_knowledge_write_the_database_fails_is_typed_by_its_sqlstate(
    knowledge: KnowledgeStore, store: CaseStore, code: str, unavailable: bool
):
    await knowledge_fault(store, code)
    with pytest.raises(KnowledgeError, match=code) as caught:
        await knowledge.upsert(some_of_it())
    assert isinstance(caught.value, KnowledgeUnavailable) is unavailable
    assert "injected" not in str(caught.value)  # the server's message may quote customer text: never passed on
    assert caught.value.__cause__ is not None
    await knowledge_fault(store, None)
    assert (await knowledge.upsert(some_of_it())).added == len(some_of_it())


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
async def test_a_database_outage_makes_the_knowledge_check_unavailable_until_it_is_back(
    knowledge: KnowledgeStore, db_url: str
):
    await knowledge.upsert(some_of_it()[:2])
    await knowledge.check()
    database = sa.make_url(db_url).database
    try:
        admin(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
        admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}'")
        with pytest.raises(KnowledgeUnavailable, match="knowledge database"):
            await knowledge.check()
        with pytest.raises(KnowledgeUnavailable):
            await knowledge.entry("esim-setup")
        # What is in memory and in Chroma still answers: searching needs no database.
        assert await knowledge.search("How do I install an eSIM?", 3) is not None
    finally:
        admin(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
    await knowledge.check()


async def test_the_knowledge_page_answers_503_while_the_knowledge_database_is_unreachable(
    store: CaseStore, tmp_path: Path, embedder, registry
):  # type: ignore[no-untyped-def]
    nowhere = create_engine(
        f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/vigil", pool_size=1, data_dir=tmp_path
    )
    unreachable = KnowledgeStore(engine=nowhere, embedder=embedder, clock=SystemClock(), chroma_path=tmp_path / "c")
    metrics = Metrics(registry)
    app = panel_app(
        views=views_of(store),
        health=Health({}, clock=SystemClock(), metrics=metrics, interval_s=1),
        metrics=metrics,
        knowledge=unreachable,
        panel=PanelSettings(auth="tokens", users=USERS),
    )
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://vigil.test") as client:
            plain = await client.get(
                "/panel/knowledge/esim-setup", headers=bearer("root") | {"accept": "application/json"}
            )
            page = await client.get("/panel/knowledge/esim-setup", headers=bearer("root") | {"accept": "text/html"})
        assert (plain.status_code, plain.json()) == (503, {"detail": "the knowledge store is unavailable"})
        assert page.status_code == 503 and "the knowledge store is unavailable" in page.text
    finally:
        await nowhere.dispose()


def admin(sql: str) -> None:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(sql)
