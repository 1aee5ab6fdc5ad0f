"""The miner on both databases, with Chroma on disk and the real embedding model: closed, human-resolved cases
become knowledge the answer path finds; nothing is mined twice, half-written, or kept with its PII."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from tests.conftest import open_knowledge
from tests.fake_anthropic import KEY, FakeAnthropic, Handler, error, hanging, tool_use
from vigil.answers.settings import AnswerSettings
from vigil.answers.skill import AnswerSkill
from vigil.cases.store import CaseStore
from vigil.cases.tables import FEEDBACK
from vigil.core.clock import ManualClock, SystemClock
from vigil.core.errors import KnowledgeError, LeaseLost
from vigil.dev.demo import bundled_conversations, load_conversations
from vigil.flow.leases import Holder, Lease
from vigil.knowledge.store import KnowledgeStore
from vigil.knowledge.tables import ENTRY
from vigil.llm.settings import LlmSettings
from vigil.mining.miner import LEASE, Miner, entry_id
from vigil.mining.rewrite import Rewriter, rewriter_from
from vigil.mining.settings import MinerSettings
from vigil.mining.tables import CASE_VECTOR, MINED_CASE
from vigil.wire.events import Event, SourceRef, Suggestion, parse

START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
LIMITS: dict[str, Any] = {"max_event_bytes": 1 << 20, "max_text_bytes": 1 << 16}
IDS = ("message_id", "event_id", "feedback_id", "conversation_id", "suggestion_id", "in_reply_to")

PARCEL = (
    "my parcel says delivered but it never arrived, the photo shows someone else's door",
    "my parcel shows as delivered but it never arrived and the delivery photo is of someone else's door",
    "parcel marked as delivered but I never got it and the delivery photo is a different door",
)
PARCEL_FIX = (
    "I've opened a missing-parcel claim for you. The refund goes back to your card within 3 working days.",
    "I've raised a missing parcel claim; you'll get the refund on your card in 3 working days.",
    "I've logged a missing-parcel claim, so the refund reaches your card within 3 working days.",
)


EXPLAINED = (
    "I'm sorry, that's frustrating. The photo the driver took doesn't match your address, so we treat the parcel "
    "as lost rather than delivered."
)


def event(**fields: Any) -> Event:
    return parse(json.dumps({"schema_version": 1, **fields}).encode(), **LIMITS)


def conversation(
    cid: str,
    turns: Sequence[tuple[str, str]],
    *,
    at: datetime = START,
    resolved_by: str | None = "human",
    csat: int | None = 5,
    tenant: str = "parcelco",
    customer: str = "Dana Reyes",
) -> list[Event]:
    """A case: opened, its messages a minute apart, then closed (unless ``resolved_by`` is None)."""
    events = [event(type="case", event_id=f"{cid}-open", conversation_id=cid, tenant=tenant, at=_t(at), event="opened")]
    for n, (role, text) in enumerate(turns, start=1):
        events.append(
            event(
                type="message",
                message_id=f"{cid}-m{n}",
                conversation_id=cid,
                tenant=tenant,
                sent_at=_t(at + timedelta(minutes=n)),
                role=role,
                author=customer if role == "customer" else "sam.k",
                text=text,
            )
        )
    if resolved_by is not None:
        events.append(
            event(
                type="case",
                event_id=f"{cid}-close",
                conversation_id=cid,
                tenant=tenant,
                at=_t(at + timedelta(minutes=len(turns) + 1)),
                event="closed",
                resolution={"resolved_by": resolved_by, "csat": csat},
            )
        )
    return events


def _t(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


async def record(store: CaseStore, events: Sequence[Event]) -> None:
    for e in events:
        await store.record(e)


PARCEL_TURNS = (
    ("customer", "Hi"),
    ("customer", PARCEL[0]),
    ("analyst", EXPLAINED),
    ("analyst", PARCEL_FIX[0]),
    ("customer", "thanks!"),
)
"""One chat, the same in every copy."""


def parcel_case(n: int, **kwargs: Any) -> list[Event]:
    return conversation(
        f"parcel-{n}",
        [
            ("customer", "Hi"),
            ("customer", PARCEL[n % 3]),
            ("analyst", EXPLAINED),
            ("analyst", PARCEL_FIX[n % 3]),
            ("customer", "thanks!"),
        ],
        at=START + timedelta(hours=n),
        **kwargs,
    )


@pytest.fixture
async def knowledge(store: CaseStore, tmp_path: Path, embedder) -> AsyncIterator[KnowledgeStore]:  # type: ignore[no-untyped-def]
    knowledge = await open_knowledge(store, tmp_path / "chroma", embedder)
    try:
        yield knowledge
    finally:
        await knowledge.close()


def miner(store: CaseStore, knowledge: KnowledgeStore, rewriter: Rewriter | None = None, **settings: Any) -> Miner:
    """A miner that serves what it mines at once, unless a test asks for review: the review the defaults ask for
    has tests of its own (``test_by_default_...``)."""
    return Miner(
        MinerSettings(**{"require_review": False, **settings}),
        engine=store.engine,
        knowledge=knowledge,
        clock=SystemClock(),
        rewriter=rewriter,
    )


async def mined(store: CaseStore) -> dict[str, tuple[str, str | None]]:
    async with store.engine.connect() as conn:
        rows = await conn.execute(sa.select(MINED_CASE.c.conversation_id, MINED_CASE.c.outcome, MINED_CASE.c.reason))
        return {r.conversation_id: (r.outcome, r.reason) for r in rows}


async def entries(store: CaseStore) -> list[Any]:
    async with store.engine.connect() as conn:
        return list((await conn.execute(sa.select(ENTRY).order_by(ENTRY.c.id))).all())


async def test_a_human_resolved_case_becomes_a_case_entry_the_answer_path_finds(store, knowledge):
    await record(store, parcel_case(0))
    report = await miner(store, knowledge).run()
    assert (report.mined, report.entries["case"]) == (1, 1)
    [row] = await entries(store)
    assert (row.kind, row.status, row.tenant, row.origin) == ("case", "active", "parcelco", "miner")
    assert row.url == "/panel/conversations/parcel-0"
    assert row.provenance["cases"][0]["message_ids"] == ["parcel-0-m2", "parcel-0-m3", "parcel-0-m4"]
    hits = await knowledge.search("the app says my parcel was delivered but I don't have it", 3, tenant="parcelco")
    assert hits and hits[0].entry_id == entry_id("parcelco", "parcel-0") and hits[0].kind == "case"
    assert "refund" in hits[0].passage
    assert not await knowledge.search("the app says my parcel was delivered but I don't have it", 3, tenant="other")


async def test_only_closed_cases_resolved_by_a_human_are_mined_and_thin_ones_are_skipped(store, knowledge):
    await record(store, parcel_case(0, resolved_by="bot"))
    await record(store, parcel_case(1, resolved_by="customer"))
    await record(store, parcel_case(2, resolved_by=None))
    await record(store, conversation("thin", [("customer", "my parcel never came"), ("analyst", "ok, done")]))
    await record(
        store,
        conversation(
            "short", [("customer", "my parcel never came"), ("analyst", "I've refunded it.")], at=START + timedelta(1)
        ),
    )
    report = await miner(store, knowledge, min_analyst_words=5).run()
    assert report.mined == 0 and report.skipped == {"no_resolution": 1, "thin": 1}
    assert await mined(store) == {"thin": ("skipped", "no_resolution"), "short": ("skipped", "thin")}
    assert await entries(store) == []


async def test_a_case_is_mined_once_and_a_rerun_changes_nothing(store, knowledge):
    await record(store, parcel_case(0))
    first = await miner(store, knowledge).run()
    before = await entries(store)
    second = await miner(store, knowledge).run()
    assert first.mined == 1 and second.mined == 0 and not second.entries
    assert await entries(store) == before


async def test_a_crash_while_writing_leaves_nothing_half_written_and_the_next_run_completes(store, knowledge):
    await record(store, parcel_case(0))
    failing = miner(store, knowledge)
    real_upsert = knowledge.upsert

    async def crash_in_the_transaction(entries_, **kwargs):  # type: ignore[no-untyped-def]
        async def boom(conn):  # type: ignore[no-untyped-def]
            await kwargs["also"](conn)
            raise RuntimeError("power cut")

        return await real_upsert(entries_, **{**kwargs, "also": boom})

    knowledge.upsert = crash_in_the_transaction  # type: ignore[method-assign]
    with pytest.raises(KnowledgeError, match="power cut"):
        await failing.run()
    knowledge.upsert = real_upsert  # type: ignore[method-assign]
    assert await entries(store) == [] and await mined(store) == {}
    async with store.engine.connect() as conn:
        assert await conn.scalar(sa.select(sa.func.count()).select_from(CASE_VECTOR)) == 0
    report = await miner(store, knowledge).run()
    assert report.mined == 1 and len(await entries(store)) == 1


async def test_a_run_while_another_miner_holds_the_lease_mines_nothing_and_says_whose_it_is(store, knowledge):
    await record(store, parcel_case(0))
    other = Lease(store.engine, LEASE, owner="replica-b", clock=SystemClock(), duration_s=600)
    assert await other.take() is None
    report = await miner(store, knowledge).run()
    assert report.mined == 0 and report.busy is not None and report.busy.owner == "replica-b"
    assert "another miner (replica-b) holds the lease until" in report.summary()
    assert await mined(store) == {}
    await other.free()
    assert (await miner(store, knowledge).run()).mined == 1


async def test_a_run_that_stalled_past_its_lease_writes_nothing_and_leaves_the_cases_to_the_next(store, knowledge):
    await record(store, parcel_case(0))
    clock = ManualClock(START)
    stalled = Miner(MinerSettings(lease_s=60), engine=store.engine, knowledge=knowledge, clock=clock, owner="a")
    other = Lease(store.engine, LEASE, owner="b", clock=clock, duration_s=60)
    real_upsert = knowledge.upsert

    async def after_a_stall(entries_, **kwargs):  # type: ignore[no-untyped-def]
        clock.advance(61)
        assert await other.take() is None
        return await real_upsert(entries_, **kwargs)

    knowledge.upsert = after_a_stall  # type: ignore[method-assign]
    with pytest.raises(LeaseLost):
        await stalled.run(START + timedelta(days=1))
    knowledge.upsert = real_upsert  # type: ignore[method-assign]
    assert await entries(store) == [] and await mined(store) == {}
    later = Miner(MinerSettings(), engine=store.engine, knowledge=knowledge, clock=clock, owner="c")
    assert (await later.run(START + timedelta(days=1))).busy == Holder("b", clock.now() + timedelta(seconds=60))
    await other.free()
    assert (await later.run(START + timedelta(days=1))).mined == 1


async def test_the_same_problem_resolved_three_times_merges_into_one_faq(store, knowledge):
    for n in range(3):
        await record(store, parcel_case(n))
    report = await miner(store, knowledge).run()
    assert report.mined == 3 and report.merged == 2
    [row] = await entries(store)
    assert row.kind == "faq" and row.provenance["support"] == 3
    assert [c["conversation_id"] for c in row.provenance["cases"]] == ["parcel-0", "parcel-1", "parcel-2"]
    assert len(row.questions) == 3 and "3 working days" in row.body
    hits = await knowledge.search(
        "where is my parcel? it says delivered but there's nothing here", 3, tenant="parcelco"
    )
    assert hits[0].entry_id == row.id and hits[0].kind == "faq"


FEE_QUESTIONS = (
    "can I get the cancellation fee back if I cancel my subscription box?",
    "will I get the cancellation fee back if I cancel the subscription box?",
    "is the cancellation fee for the subscription box refunded if I cancel it?",
)
REFUNDABLE = "The cancellation fee is refundable within 14 days: I've refunded the fee to your card."
NOT_REFUNDABLE = "The cancellation fee is not refundable within 14 days, so I've refunded nothing."

APART = {"merge_similarity": 0.99, "faq_similarity": 0.7}
"""Each case its own entry (as cases of one problem written in different words end), grouped for FAQs."""


async def test_entries_of_one_problem_in_different_words_with_one_resolution_become_one_faq(store, knowledge):
    for n in range(3):
        await record(store, parcel_case(n))
    report = await miner(store, knowledge, **APART).run()
    assert report.merged == 0 and report.entries["superseded"] == 2
    faq, *superseded = sorted(await entries(store), key=lambda r: r.kind != "faq")
    assert faq.id == entry_id("parcelco", "parcel-0") and (faq.kind, faq.status) == ("faq", "active")
    assert [c["conversation_id"] for c in faq.provenance["cases"]] == ["parcel-0", "parcel-1", "parcel-2"]
    assert faq.provenance["support"] == 3 and len(faq.questions) == 3 and "3 working days" in faq.body
    assert sorted(faq.provenance["subsumes"]) == sorted(r.id for r in superseded)
    assert all(r.status == "retired" and r.provenance["superseded_by"] == faq.id for r in superseded)
    question = "where is my parcel? it says delivered but there's nothing here"
    hits = await knowledge.search(question, 3, tenant="parcelco")
    assert [h.entry_id for h in hits] == [faq.id]
    [answer] = await AnswerSkill(knowledge, AnswerSettings()).propose(
        conversation("new", [("customer", question)])[1], None
    )
    assert answer.sources[0].id == faq.id and answer.why.startswith("matches the FAQ")
    before = await entries(store)
    again = await miner(store, knowledge, **APART).run()
    assert again.mined == 0 and not again.entries and await entries(store) == before


async def three_parcel_cases_as_an_faq(store: CaseStore, knowledge: KnowledgeStore) -> None:
    for n in range(3):
        await record(store, parcel_case(n))
    await miner(store, knowledge, **APART).run()


async def reopen(store: CaseStore, n: int) -> None:
    """Parcel case ``n`` reopened the next day."""
    await reopen_conversation(store, f"parcel-{n}", at=START + timedelta(1))


async def reopen_conversation(store: CaseStore, cid: str, *, at: datetime) -> None:
    await store.record(
        event(type="case", event_id=f"{cid}-re", conversation_id=cid, tenant="parcelco", at=_t(at), event="reopened")
    )


async def test_an_faq_that_loses_a_case_below_the_minimum_gives_its_entries_back(store, knowledge):
    await three_parcel_cases_as_an_faq(store, knowledge)
    await reopen(store, 2)
    await miner(store, knowledge, **APART).run()
    rows = {r.id: r for r in await entries(store)}
    assert {r.kind for r in rows.values()} == {"case"}
    assert rows[entry_id("parcelco", "parcel-1")].status == "active"
    assert "superseded_by" not in rows[entry_id("parcelco", "parcel-1")].provenance
    assert rows[entry_id("parcelco", "parcel-2")].status == "retired"


async def test_a_superseded_entry_a_lead_retired_stays_retired_when_its_faq_falls_apart(store, knowledge):
    await three_parcel_cases_as_an_faq(store, knowledge)
    assert await knowledge.govern(entry_id("parcelco", "parcel-1"), status="retired")
    await reopen(store, 2)
    await miner(store, knowledge, **APART).run()
    rows = {r.id: r for r in await entries(store)}
    assert rows[entry_id("parcelco", "parcel-1")].status == "retired"
    assert rows[entry_id("parcelco", "parcel-0")].status == "active"


async def test_cases_of_one_problem_with_contradicting_resolutions_become_no_faq(store, knowledge):
    for n, fix in enumerate((REFUNDABLE, REFUNDABLE, NOT_REFUNDABLE)):
        await record(
            store,
            conversation(f"fee-{n}", [("customer", FEE_QUESTIONS[n]), ("analyst", fix)], at=START + timedelta(hours=n)),
        )
    await miner(store, knowledge, min_analyst_words=0, **APART).run()
    rows = await entries(store)
    assert len(rows) == 3 and not any(r.kind == "faq" for r in rows)
    assert any(r.status == "pending_review" for r in rows)
    proposals = await AnswerSkill(knowledge, AnswerSettings()).propose(
        conversation("new", [("customer", FEE_QUESTIONS[0])])[1], None
    )
    assert not any(p.why.startswith("matches the FAQ") for p in proposals)


async def test_later_runs_merge_into_what_earlier_runs_mined(store, knowledge):
    await record(store, parcel_case(0))
    await miner(store, knowledge).run()
    await record(store, parcel_case(1))
    report = await miner(store, knowledge).run()
    assert report.merged == 1
    [row] = await entries(store)
    assert row.id == entry_id("parcelco", "parcel-0") and row.provenance["support"] == 2


async def test_conflicting_resolutions_of_one_problem_wait_for_review_instead_of_being_served(store, knowledge):
    question = "can I get the cancellation fee back if I cancel my subscription box?"
    await record(
        store,
        conversation(
            "fee-1",
            [
                ("customer", question),
                ("analyst", "The cancellation fee is refundable within 14 days: I've refunded the fee to your card."),
            ],
        ),
    )
    await record(
        store,
        conversation(
            "fee-2",
            [
                ("customer", "will I get the cancellation fee back if I cancel the subscription box?"),
                ("analyst", "The cancellation fee is not refundable within 14 days, so I've refunded nothing."),
            ],
            at=START + timedelta(hours=1),
        ),
    )
    report = await miner(store, knowledge, min_analyst_words=0).run()
    assert report.entries["pending_review"] == 1
    [row] = await entries(store)
    assert row.status == "pending_review" and len(row.provenance["conflicts"]) == 1
    assert not await knowledge.search(question, 3, tenant="parcelco")
    assert await knowledge.govern(row.id, status="active")
    assert (await knowledge.search(question, 3, tenant="parcelco"))[0].entry_id == row.id


async def test_a_lead_s_approval_of_a_disagreement_holds_until_a_new_disagreement_comes(store, knowledge):
    question = "can I get the cancellation fee back if I cancel my subscription box?"
    refundable = "The cancellation fee is refundable within 14 days: I've refunded the fee to your card."
    not_refundable = "The cancellation fee is not refundable within 14 days, so I've refunded nothing."
    for n, fix in enumerate((refundable, not_refundable)):
        await record(
            store, conversation(f"fee-{n}", [("customer", question), ("analyst", fix)], at=START + timedelta(hours=n))
        )
    await miner(store, knowledge, min_analyst_words=0).run()
    [row] = await entries(store)
    assert row.status == "pending_review"
    await knowledge.govern(row.id, status="active")
    await answered_from(store, row.id, ["accepted"])  # the entry changes, the disagreement does not
    await miner(store, knowledge, min_analyst_words=0).run()
    [row] = await entries(store)
    assert row.status == "active"
    stated = refundable if row.provenance["kept"] == "fee-0" else not_refundable
    other = not_refundable if stated == refundable else refundable
    await record(store, conversation("fee-8", [("customer", question), ("analyst", stated)], at=START + timedelta(1)))
    await miner(store, knowledge, min_analyst_words=0).run()  # a case that agrees with what the lead approved
    assert (await entries(store))[0].status == "active"
    # A new case of the other side, in its own words (a copy of an approved one would be no new evidence).
    reworded = {
        refundable: "Yes: we'll refund the cancellation fee to your card, it's refundable within 14 days.",
        not_refundable: "I'm afraid the cancellation fee isn't refundable within 14 days, so no refund this time.",
    }[other]
    await record(store, conversation("fee-9", [("customer", question), ("analyst", reworded)], at=START + timedelta(2)))
    await miner(store, knowledge, min_analyst_words=0).run()
    assert (await entries(store))[0].status == "pending_review"


async def test_a_reopened_case_has_its_knowledge_withdrawn(store, knowledge):
    await record(store, parcel_case(0))
    await miner(store, knowledge).run()
    await reopen(store, 0)
    report = await miner(store, knowledge).run()
    assert report.withdrawn == 1
    [row] = await entries(store)
    assert row.status == "retired" and row.provenance["support"] == 0
    assert (await mined(store))["parcel-0"] == ("withdrawn", None)
    assert not await knowledge.search(PARCEL[0], 3, tenant="parcelco")


async def test_a_case_the_customer_rated_badly_is_kept_but_not_served(store, knowledge):
    await record(store, parcel_case(0, csat=1))
    await miner(store, knowledge).run()
    [row] = await entries(store)
    assert row.status == "active" and row.confidence < 0.4
    assert not await knowledge.search(PARCEL[0], 3, tenant="parcelco")


async def test_by_default_an_entry_of_one_case_waits_for_a_lead_and_three_agreeing_cases_are_served_at_once(
    store, knowledge
):
    defaults = Miner(MinerSettings(), engine=store.engine, knowledge=knowledge, clock=SystemClock())
    await record(store, parcel_case(0))
    await defaults.run()
    [row] = await entries(store)
    assert row.status == "pending_review"
    assert not await knowledge.search(PARCEL[0], 3, tenant="parcelco")

    for n in (1, 2):  # the same problem, resolved alike, twice more
        await record(store, parcel_case(n))
    await defaults.run()
    served = [e for e in await entries(store) if e.status == "active"]
    assert len(served) == 1 and served[0].provenance["support"] == 3
    assert await knowledge.search(PARCEL[0], 3, tenant="parcelco")


async def test_with_review_required_mined_entries_wait_for_a_lead(store, knowledge):
    await record(store, parcel_case(0))
    await miner(store, knowledge, require_review=True, serve_at_cases=0).run()
    [row] = await entries(store)
    assert row.status == "pending_review"
    assert [e["id"] for e in await knowledge.governed(status="pending_review")] == [row.id]
    assert not await knowledge.search(PARCEL[0], 3, tenant="parcelco")


async def test_no_pii_from_the_case_is_stored(store, knowledge):
    await record(
        store,
        conversation(
            "pii",
            [
                (
                    "customer",
                    "Hi, I'm Dana Reyes, my parcel 4471-2290 never came. "
                    "Email me at dana.reyes@example.com or call 07700 900123",
                ),
                (
                    "analyst",
                    "Thanks Dana. I've opened a missing-parcel claim; the refund reaches your card in 3 working days.",
                ),
            ],
        ),
    )  # fmt: skip
    await miner(store, knowledge, min_analyst_words=0).run()
    [row] = await entries(store)
    stored = json.dumps([row.title, row.body, row.provenance, row.questions])
    for secret in ("Dana", "Reyes", "dana.reyes@example.com", "07700 900123"):
        assert secret not in stored
    assert "[EMAIL]" in stored and "[PHONE]" in stored


PII_CASE = [
    (
        "customer",
        "Hi, I'm Dana Reyes, my parcel 4471-2290 never came. Email me at dana.reyes@example.com or call 07700 900123",
    ),
    ("analyst", "Thanks Dana. I've opened a missing-parcel claim; the refund reaches your card in 3 working days."),
]
SECRETS = ("Dana", "Reyes", "dana.reyes@example.com", "07700 900123", "4471-2290")
REWRITTEN: dict[str, Any] = {
    "problem": "A parcel the customer was expecting never arrived.",
    "symptoms": ["The parcel has not been delivered"],
    "context": {"product": None, "error_text": None},
    "steps": ["Open a missing-parcel claim.", "Tell the customer the refund reaches their card in 3 working days."],
    "outcome": "",
}


@pytest.fixture
async def rewriter(fake_llm: FakeAnthropic) -> AsyncIterator[Rewriter]:
    settings = LlmSettings(api_key=SecretStr(KEY), base_url=fake_llm.url)
    built = rewriter_from(settings, MinerSettings(llm_timeout_s=0.5), registry=CollectorRegistry(), clock=SystemClock())
    assert built is not None
    yield built
    await built.aclose()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_with_an_llm_the_entry_is_its_rewrite_and_it_was_sent_only_redacted_text(
    store, knowledge, fake_llm: FakeAnthropic, rewriter: Rewriter
):
    await record(store, conversation("pii", PII_CASE))
    fake_llm.handler = tool_use("record_entry", REWRITTEN)

    report = await miner(store, knowledge, rewriter, min_analyst_words=0).run()

    assert (report.mined, report.rewritten) == (1, 1)
    assert "1 rewritten by the LLM" in report.summary()
    [row] = await entries(store)
    assert row.title == "A parcel the customer was expecting never arrived."
    assert "- Open a missing-parcel claim.\n- Tell the customer the refund" in row.body
    assert "The parcel has not been delivered" in row.body  # a symptom, as context
    [case] = row.provenance["cases"]
    assert case["steps"] == REWRITTEN["steps"] and case["message_ids"] == ["pii-m1", "pii-m2"]
    (sent,) = fake_llm.requests
    for secret in SECRETS:
        assert secret not in json.dumps(sent)
    assert "[EMAIL]" in json.dumps(sent) and "[PHONE]" in json.dumps(sent)
    hits = await knowledge.search("my parcel never arrived", 3, tenant="parcelco")
    assert hits and hits[0].entry_id == row.id


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_what_the_llm_writes_is_redacted_again(store, knowledge, fake_llm: FakeAnthropic, rewriter: Rewriter):
    await record(store, conversation("pii", PII_CASE))
    fake_llm.handler = tool_use("record_entry", {**REWRITTEN, "outcome": "Dana Reyes got a refund on her card."})

    await miner(store, knowledge, rewriter, min_analyst_words=0).run()

    [row] = await entries(store)
    stored = json.dumps([row.title, row.body, row.provenance, row.questions])
    for secret in SECRETS:
        assert secret not in stored
    assert "[NAME] got a refund on her card." in row.body


def invents_a_phone_number() -> Handler:
    return tool_use("record_entry", {**REWRITTEN, "steps": ["Call 0800 123 4567 to chase the courier."]})


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    "failing",
    [
        lambda fake: hanging(fake, [], then=tool_use("record_entry", REWRITTEN)),
        lambda fake: error(503, "overloaded_error"),
        lambda fake: tool_use("record_entry", {**REWRITTEN, "steps": "Open a claim."}),
        lambda fake: invents_a_phone_number(),
    ],
    ids=["timeout", "5xx", "malformed", "invented-phone"],
)
async def test_when_the_llm_fails_the_case_keeps_its_extractive_entry(
    store, knowledge, fake_llm: FakeAnthropic, rewriter: Rewriter, failing
):
    await record(store, conversation("pii", PII_CASE))
    fake_llm.handler = failing(fake_llm)

    report = await miner(store, knowledge, rewriter, min_analyst_words=0).run()

    assert (report.mined, report.rewritten) == (1, 0)
    assert "rewritten" not in report.summary()
    [row] = await entries(store)
    assert row.title.startswith("I'm [NAME], my parcel [ID] never came.")
    assert "I've opened a missing-parcel claim; the refund reaches your card in 3 working days." in row.body
    assert "0800 123 4567" not in row.body and "never arrived" not in row.body
    assert len(fake_llm.requests) == 1


async def answered_from(store: CaseStore, entry: str, verdicts: Sequence[str], cid: str = "later") -> None:
    """An answer drawn from ``entry`` in a later conversation, and analysts' verdicts on it."""
    await record(store, conversation(cid, [("customer", PARCEL[0])], at=START + timedelta(days=2)))
    await store.save_suggestion(
        Suggestion(
            suggestion_id=f"{cid}-s1",
            conversation_id=cid,
            tenant="parcelco",
            in_reply_to=f"{cid}-m1",
            created_at=START + timedelta(days=2, minutes=1),
            kind="answer",
            text="I've opened a missing-parcel claim.",
            confidence=0.7,
            sources=[SourceRef(kind="case", id=entry, title="parcel", score=0.9)],
            latency_ms=3.0,
        )
    )
    for n, verdict in enumerate(verdicts):
        await store.record(
            event(
                type="feedback",
                feedback_id=f"{cid}-f{n}",
                suggestion_id=f"{cid}-s1",
                conversation_id=cid,
                verdict=verdict,
                at=_t(START + timedelta(days=2, minutes=2 + n)),
            )
        )


async def test_accepted_answers_raise_an_entry_s_confidence_and_dismissed_ones_lower_it(store, knowledge):
    await record(store, parcel_case(0))
    await miner(store, knowledge).run()
    [row] = await entries(store)
    assert row.confidence == pytest.approx(2 / 3, abs=1e-3)
    await answered_from(store, row.id, ["accepted", "edited"])
    await miner(store, knowledge).run()
    [row] = await entries(store)
    assert row.confidence == pytest.approx(4 / 5, abs=1e-3)
    assert row.provenance["feedback"] == {"accepted": 2, "dismissed": 0}
    await miner(store, knowledge).run()  # each verdict is counted once
    assert (await entries(store))[0].confidence == pytest.approx(4 / 5, abs=1e-3)
    await answered_from(store, row.id, ["dismissed"] * 5, cid="later-2")
    await miner(store, knowledge).run()
    [row] = await entries(store)
    assert row.confidence == pytest.approx(4 / 10, abs=1e-3)
    await answered_from(store, row.id, ["dismissed"], cid="later-3")
    await miner(store, knowledge).run()
    assert not await knowledge.search(PARCEL[0], 3, tenant="parcelco")


async def test_verdicts_on_an_entry_follow_it_into_the_faq_it_becomes_part_of(store, knowledge):
    for n in range(2):
        await record(store, parcel_case(n))
    await miner(store, knowledge, **APART).run()  # two entries, too few cases for an FAQ
    second = entry_id("parcelco", "parcel-1")
    await answered_from(store, second, ["dismissed"] * 4)
    await record(store, parcel_case(2))
    await miner(store, knowledge, **APART).run()  # the third case: one FAQ, founded by parcel-0's entry
    rows = {r.id: r for r in await entries(store)}
    faq = rows[entry_id("parcelco", "parcel-0")]
    assert faq.kind == "faq" and rows[second].status == "retired"
    # Three well-rated cases and the four dismissals of the superseded entry's answer: (3 + 1) / (7 + 2).
    assert faq.confidence == pytest.approx(4 / 9, abs=1e-3)
    assert rows[second].provenance["feedback"] == {"accepted": 0, "dismissed": 4}


async def test_a_verdict_stamped_before_the_mark_by_a_replica_whose_clock_is_behind_is_counted_once(store, knowledge):
    await record(store, parcel_case(0))
    await miner(store, knowledge).run()
    [row] = await entries(store)
    await answered_from(store, row.id, ["accepted"])
    await miner(store, knowledge).run()
    async with store.engine.connect() as conn:
        mark = await conn.scalar(sa.select(FEEDBACK.c.received_at).where(FEEDBACK.c.feedback_id == "later-f0"))
    # Another replica, its clock a minute behind, stores a verdict after the miner has read up to its mark.
    await answered_from(store, row.id, ["accepted"], cid="later-2")
    async with store.engine.begin() as conn:
        await conn.execute(
            sa.update(FEEDBACK)
            .where(FEEDBACK.c.feedback_id == "later-2-f0")
            .values(received_at=mark - timedelta(minutes=1))
        )
    for _ in range(2):
        await miner(store, knowledge).run()
        [row] = await entries(store)
        assert row.provenance["feedback"] == {"accepted": 2, "dismissed": 0}


async def test_a_mined_entry_expires_its_ttl_after_the_latest_case_that_taught_it(store, knowledge):
    await record(store, parcel_case(0))
    await miner(store, knowledge, entry_ttl_days=1).run()
    [row] = await entries(store)
    assert row.expires_at == START + timedelta(minutes=6) + timedelta(days=1)
    assert not await knowledge.search(PARCEL[0], 3, tenant="parcelco")  # the clock is past it (it is 2026-12)
    await record(store, parcel_case(1))
    await miner(store, knowledge).run()  # without a TTL, the entry a new case renews never expires
    [row] = await entries(store)
    assert row.expires_at is None
    assert (await knowledge.search(PARCEL[0], 3, tenant="parcelco"))[0].entry_id == row.id


def test_the_daemon_loads_the_redactor_s_name_lists_only_when_there_is_a_case_to_mine(tmp_path: Path):
    # Faker's name lists and phonenumbers take ~50 MiB: every daemon composes the miner, few mine at start.
    script = (
        "import sys\n"
        "from vigil.app.compose import compose\n"
        "from vigil.app.settings import Settings\n"
        f"compose(Settings(_env_file=None, data_dir={str(tmp_path)!r}))\n"
        "print(sorted({m.partition('.')[0] for m in sys.modules} & {'faker', 'phonenumbers'}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


async def test_copies_of_one_chat_count_once_with_the_repeats_in_provenance(store, knowledge):
    # The demo replays the same chats in a loop: three copies of one case are one case's evidence, not an FAQ's.
    for n in range(3):
        await record(store, conversation(f"copy-{n}", PARCEL_TURNS, at=START + timedelta(days=n)))
    report = await miner(store, knowledge).run()
    assert (report.mined, report.repeats) == (1, 2)
    [row] = await entries(store)
    assert row.kind == "case" and row.provenance["support"] == 1 and row.provenance["repeats"] == 2
    assert row.provenance["cases"][0]["repeats"] == ["copy-1", "copy-2"]
    assert {cid: r for cid, r in (await mined(store)).items()} == {
        "copy-0": ("mined", None),
        "copy-1": ("mined", "repeat"),
        "copy-2": ("mined", "repeat"),
    }


async def test_a_copy_in_a_later_run_counts_once_and_a_reopened_copy_is_taken_off_the_repeats(store, knowledge):
    await record(store, conversation("copy-0", PARCEL_TURNS))
    await miner(store, knowledge).run()
    await record(store, conversation("copy-1", PARCEL_TURNS, at=START + timedelta(days=2)))
    assert (await miner(store, knowledge).run()).repeats == 1
    [row] = await entries(store)
    assert row.provenance["support"] == 1 and row.provenance["cases"][0]["repeats"] == ["copy-1"]
    await reopen_conversation(store, "copy-1", at=START + timedelta(days=3))
    report = await miner(store, knowledge).run()
    assert report.withdrawn == 1
    [row] = await entries(store)
    assert row.status == "active" and row.provenance["support"] == 1 and row.provenance["repeats"] == 0


async def test_a_copy_outside_the_window_is_new_evidence(store, knowledge):
    for n in range(3):
        await record(store, conversation(f"copy-{n}", PARCEL_TURNS, at=START - timedelta(days=40 * (2 - n))))
    report = await miner(store, knowledge).run()
    assert (report.mined, report.repeats) == (3, 0)
    [row] = await entries(store)
    assert row.kind == "faq" and row.provenance["support"] == 3


async def test_three_different_cases_of_one_problem_are_not_repeats(store, knowledge):
    for n in range(3):
        await record(store, parcel_case(n))
    assert (await miner(store, knowledge).run()).repeats == 0


async def test_the_demo_s_chats_replayed_round_after_round_make_no_faq_of_their_copies(store, knowledge):
    # Issue 27: the demo replays its chats in a loop, and each round's copies made "mined FAQs" of one scripted chat.
    rounds = 4
    for round_no in range(rounds):
        for events in load_conversations(bundled_conversations()):
            for original in events:
                fresh = {k: f"{v}-r{round_no}" if k in IDS else v for k, v in original.items()}
                stamp = "sent_at" if fresh["type"] == "message" else "at"
                moment = datetime.fromisoformat(fresh[stamp].replace("Z", "+00:00")) + timedelta(hours=round_no)
                fresh[stamp] = _t(moment)
                await store.record(parse(json.dumps(fresh).encode(), **LIMITS))
    report = await miner(store, knowledge).run()
    assert report.mined > 0 and report.repeats == (rounds - 1) * report.mined
    mined_rows = [r for r in await entries(store) if r.origin == "miner"]
    served = [r for r in mined_rows if r.status != "retired"]  # an FAQ's provenance holds its superseded entries' cases
    assert sum(r.provenance["repeats"] for r in served) == report.repeats
    # Only the first round's chats are evidence: an FAQ, if any, is of different chats of one problem.
    counted = [c["conversation_id"] for r in mined_rows for c in r.provenance["cases"]]
    assert counted and all(cid.endswith("-r0") for cid in counted)
    for faq in (r for r in mined_rows if r.kind == "faq"):
        assert len({c["conversation_id"] for c in faq.provenance["cases"]}) == faq.provenance["support"] >= 3


async def test_an_faq_says_since_when_it_is_one_and_keeps_it_while_it_lasts(store, knowledge):
    for n in range(3):
        await record(store, parcel_case(n))
    await miner(store, knowledge).run()
    [row] = await entries(store)
    since = row.provenance["faq_since"]
    assert row.kind == "faq" and datetime.fromisoformat(since) <= datetime.now(UTC)
    await answered_from(store, row.id, ["accepted"])  # the entry is written again
    await miner(store, knowledge).run()
    [row] = await entries(store)
    assert row.provenance["faq_since"] == since
    await reopen(store, 2)
    await miner(store, knowledge).run()
    [row] = await entries(store)
    assert row.kind == "case" and "faq_since" not in row.provenance
