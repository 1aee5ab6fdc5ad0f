"""Verdicts teach: an analyst's dismissal lowers the entry for questions like the one it answered, for that tenant only;
an acceptance raises it. The formula on its own, then the store on both databases with the real model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.conftest import RememberingEmbedder, help_centre
from tests.knowledge.test_batching import Counting
from vigil.cases.store import CaseStore
from vigil.core.clock import ManualClock
from vigil.knowledge.documents import Entry, Passage
from vigil.knowledge.store import MINED, Governance, KnowledgeStore
from vigil.knowledge.tables import SUPERSEDED_BY, VERDICT
from vigil.knowledge.verdicts import FULL, HALF_LIFE_S, HORIZON_S, SIGNS, SIMILAR, Verdict, opposed, record, term

NOW = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
WRONG = "faq-leave-without-number"  # STAC: for leaving without the number
ASKED = "I want to leave brightwave but keep my mobile number"  # needs a PAC: the FAQ is the opposite
AGAIN = "I'm leaving Brightwave but want to keep my mobile number"  # the next customer, same need (cosine 0.96)
OPPOSITE = "I want to leave Brightwave mobile but I don't need my number"  # what the FAQ is for (cosine 0.94 to ASKED)

# --- the formula ---


def test_no_verdict_on_a_similar_question_moves_nothing():
    assert term([], [], []) == 0.0
    assert term([SIMILAR - 0.01], [SIGNS["dismissed"]], [0.0]) == 0.0


def test_one_dismissal_on_the_same_question_is_minus_a_half_and_two_are_surer():
    assert term([1.0], [SIGNS["dismissed"]], [0.0]) == pytest.approx(-0.5)
    assert term([1.0, 0.95], [SIGNS["dismissed"]] * 2, [0.0, 0.0]) == pytest.approx(-2 / 3)


def test_an_acceptance_raises_an_edit_less_and_opposite_verdicts_cancel():
    assert term([1.0], [SIGNS["accepted"]], [0.0]) == pytest.approx(0.5)
    assert 0 < term([1.0], [SIGNS["edited"]], [0.0]) < term([1.0], [SIGNS["accepted"]], [0.0])
    assert term([1.0, 1.0], [SIGNS["accepted"], SIGNS["dismissed"]], [0.0, 0.0]) == 0.0


def test_a_verdict_counts_more_the_nearer_its_question_and_the_newer_it_is():
    halfway = (SIMILAR + FULL) / 2
    assert term([halfway], [-1.0], [0.0]) == pytest.approx(-0.5 / 1.5)
    assert term([FULL], [-1.0], [0.0]) == term([1.0], [-1.0], [0.0])
    assert term([1.0], [-1.0], [HALF_LIFE_S]) == pytest.approx(-0.5 / 1.5)
    # Received on a replica whose clock is ahead: as new, not more than new.
    assert term([1.0], [-1.0], [-3600.0]) == term([1.0], [-1.0], [0.0])


def test_a_question_that_negates_what_the_judged_one_says_asks_the_opposite():
    assert opposed(OPPOSITE, ASKED) and opposed(ASKED, OPPOSITE)
    assert not opposed(AGAIN, ASKED)
    assert not opposed("My router light is flashing amber", ASKED)  # nothing shared: not opposed, only unrelated


# --- in the store ---


@pytest.fixture
async def knowledge(store: CaseStore, tmp_path: Path, embedder: RememberingEmbedder) -> AsyncIterator[KnowledgeStore]:
    loaded = await _opened(store, tmp_path / "chroma", embedder)
    await loaded.upsert(help_centre())
    yield loaded
    await loaded.close()


async def _opened(store: CaseStore, chroma: Path, embedder: object, clock: ManualClock | None = None) -> KnowledgeStore:
    knowledge = KnowledgeStore(
        engine=store.engine,
        embedder=embedder,  # type: ignore[arg-type]
        clock=clock or ManualClock(NOW),
        chroma_path=chroma,
    )
    await knowledge.open()
    return knowledge


async def judge(
    store: CaseStore,
    question: str,
    entry_id: str,
    verdict: str,
    *,
    tenant: str = "brightwave",
    n: int = 1,
    received_at: datetime = NOW,
) -> None:
    """An analyst of ``tenant`` gave ``verdict`` on an answer to ``question`` drawn from ``entry_id``."""
    async with store.engine.begin() as conn:
        await record(
            conn,
            Verdict(
                conversation_id=f"c-{tenant}-{n}",
                feedback_id=f"f-{n}",
                tenant=tenant,
                entry_id=entry_id,
                verdict=verdict,
                question=question,
                suggestion_id=f"s-{tenant}-{n}",
                message_id=f"m-{n}",
                at=received_at,
                received_at=received_at,
                text="they want to keep the number: a PAC, not a STAC" if verdict == "dismissed" else None,
            ),
        )


async def first(knowledge: KnowledgeStore, question: str, tenant: str = "brightwave") -> str:
    return (await knowledge.search(question, 3, tenant=tenant))[0].entry_id


async def test_a_dismissal_changes_the_next_similar_questions_answer(store: CaseStore, knowledge: KnowledgeStore):
    assert await first(knowledge, ASKED) == WRONG
    assert await first(knowledge, AGAIN) == WRONG
    await judge(store, ASKED, WRONG, "dismissed")
    assert await knowledge.refresh_if_changed()
    hits = await knowledge.search(AGAIN, 5, tenant="brightwave")
    assert hits[0].entry_id != WRONG
    dismissed = next(h for h in hits if h.entry_id == WRONG)
    assert dismissed.verdict == pytest.approx(-0.5, abs=0.05)
    assert dismissed.score < hits[0].score
    assert await first(knowledge, ASKED) != WRONG  # the very question, asked again


async def test_a_dismissal_does_not_reach_another_tenant_or_global_search(store: CaseStore, knowledge: KnowledgeStore):
    before = await knowledge.search(AGAIN, 5, tenant="sparkline")
    await judge(store, ASKED, WRONG, "dismissed", tenant="brightwave")
    await knowledge.refresh_if_changed()
    assert await knowledge.search(AGAIN, 5, tenant="sparkline") == before
    assert (await knowledge.search(AGAIN, 5))[0].entry_id == WRONG  # vigil kb search, no tenant


async def test_a_dismissal_leaves_unrelated_questions_as_they_were(store: CaseStore, knowledge: KnowledgeStore):
    unrelated = ["My router light is flashing amber", "what's my PAC code", "How do I cancel my broadband?"]
    before = [await knowledge.search(q, 5, tenant="brightwave") for q in unrelated]
    await judge(store, ASKED, WRONG, "dismissed")
    await knowledge.refresh_if_changed()
    assert [await knowledge.search(q, 5, tenant="brightwave") for q in unrelated] == before


async def test_a_dismissal_does_not_reach_a_question_asking_the_opposite(store: CaseStore, knowledge: KnowledgeStore):
    # The model puts them at cosine 0.94; the words say one keeps the number and the other does not need it.
    before = await knowledge.search(OPPOSITE, 5, tenant="brightwave")
    assert before[0].entry_id == WRONG  # right for this one
    await judge(store, ASKED, WRONG, "dismissed")
    await knowledge.refresh_if_changed()
    assert await knowledge.search(OPPOSITE, 5, tenant="brightwave") == before


async def test_an_acceptance_raises_the_entry_for_similar_questions(store: CaseStore, knowledge: KnowledgeStore):
    question = "leaving brightwave, want to keep my number"
    hits = await knowledge.search(question, 5, tenant="brightwave")
    runner_up = hits[1].entry_id
    await judge(store, "I'm leaving brightwave and I want to keep my number", runner_up, "accepted")
    await knowledge.refresh_if_changed()
    raised = await knowledge.search(question, 5, tenant="brightwave")
    assert raised[0].entry_id == runner_up and raised[0].verdict > 0


async def test_a_verdict_on_an_entry_later_folded_into_an_faq_counts_for_the_faq(
    store: CaseStore, knowledge: KnowledgeStore
):
    # An answer drawn from a mined entry was dismissed; the miner then folded that entry into an FAQ (retired,
    # superseded by it): the dismissal now moves the FAQ.
    folded = Entry(
        id="case-folded",
        kind="case",
        title="leaving but keeping my number",
        body="Text STAC to 75075.",
        origin=MINED,
        passages=(
            Passage(id="case-folded#1", heading=None, text="leaving but keeping my number\nText STAC to 75075."),
        ),
        tenant="brightwave",
    )
    await knowledge.upsert(
        [folded], governance={folded.id: Governance(status="retired", provenance={SUPERSEDED_BY: WRONG})}
    )
    await judge(store, ASKED, folded.id, "dismissed")
    assert await knowledge.refresh_if_changed()
    hits = await knowledge.search(AGAIN, 5, tenant="brightwave")
    assert hits[0].entry_id != WRONG
    assert next(h for h in hits if h.entry_id == WRONG).verdict == pytest.approx(-0.5, abs=0.05)


async def test_verdicts_survive_a_restart_and_are_embedded_once(
    store: CaseStore, knowledge: KnowledgeStore, tmp_path: Path, embedder: RememberingEmbedder
):
    await judge(store, ASKED, WRONG, "dismissed")
    await knowledge.refresh_if_changed()  # embeds the question and writes its vector back
    async with store.engine.connect() as conn:
        stored = (await conn.execute(sa.select(VERDICT.c.vector, VERDICT.c.embedder))).one()
    assert stored.vector is not None and stored.embedder == embedder.name
    counting = Counting(embedder)
    replica = await _opened(store, tmp_path / "chroma", counting)  # another replica, or this one restarted
    try:
        assert [ASKED] not in counting.batches
        assert (await replica.search(AGAIN, 3, tenant="brightwave"))[0].entry_id != WRONG
    finally:
        await replica.close()


async def test_a_verdict_received_twice_counts_once(store: CaseStore, knowledge: KnowledgeStore):
    await judge(store, ASKED, WRONG, "dismissed")
    await judge(store, ASKED, WRONG, "dismissed")  # the same feedback event, delivered again
    await knowledge.refresh_if_changed()
    assert not await knowledge.refresh_if_changed()
    hits = await knowledge.search(ASKED, 5, tenant="brightwave")
    assert next(h for h in hits if h.entry_id == WRONG).verdict == pytest.approx(-0.5, abs=0.01)


async def test_a_verdict_stamped_a_little_before_the_last_one_learned_is_learned_too(
    store: CaseStore, knowledge: KnowledgeStore
):
    # Another replica, its clock a minute behind, stores a verdict after this one has learned a later one.
    await judge(store, "how do I get my PAC", "faq-get-pac", "accepted", n=1)
    assert await knowledge.refresh_if_changed()
    await judge(store, ASKED, WRONG, "dismissed", n=2, received_at=NOW - timedelta(minutes=1))
    assert await knowledge.refresh_if_changed()
    assert await first(knowledge, AGAIN) != WRONG


async def test_old_verdicts_weigh_less_and_are_forgotten(store: CaseStore, tmp_path: Path, embedder):  # type: ignore[no-untyped-def]
    clock = ManualClock(NOW)
    knowledge = await _opened(store, tmp_path / "chroma", embedder, clock)
    try:
        await knowledge.upsert(help_centre())
        await judge(store, ASKED, WRONG, "dismissed", received_at=NOW - timedelta(seconds=HALF_LIFE_S))
        await knowledge.refresh_if_changed()
        hits = await knowledge.search(ASKED, 5, tenant="brightwave")
        assert next(h for h in hits if h.entry_id == WRONG).verdict == pytest.approx(-0.5 / 1.5, abs=0.01)
        clock.advance(HORIZON_S)
        assert await knowledge.refresh_if_changed()  # forgotten
        assert await first(knowledge, ASKED) == WRONG
    finally:
        await knowledge.close()


async def test_a_dismissal_still_counts_after_the_store_switches_to_a_tuned_model(
    store: CaseStore, knowledge: KnowledgeStore, embedder: RememberingEmbedder
):
    # The verdict's question is embedded again by the new model: the old model's vector of it would be noise to it.
    from tests.knowledge.test_store import Reversed

    await judge(store, ASKED, WRONG, "dismissed")
    assert await knowledge.refresh_if_changed()
    assert await knowledge.use_model(Reversed(embedder, "all-MiniLM-L6-v2-tuned-1"))
    hits = await knowledge.search(AGAIN, 5, tenant="brightwave")
    assert hits[0].entry_id != WRONG
    assert next(h for h in hits if h.entry_id == WRONG).verdict == pytest.approx(-0.5, abs=0.05)
