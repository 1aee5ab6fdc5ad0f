"""The answer skill and the intervention policy, on the bundled help centre with the real model."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import help_centre, open_knowledge
from vigil.answers.intervention import InterventionPolicy, similarity
from vigil.answers.settings import AnswerSettings
from vigil.answers.skill import MODELS, AnswerSkill, features, fit_to_question, judged
from vigil.answers.snippets import extract
from vigil.cases.questions import asks_yes_or_no
from vigil.cases.store import CaseStore, Earlier
from vigil.core.clock import ManualClock
from vigil.flow.case import CaseState
from vigil.flow.skills import Proposal
from vigil.knowledge.store import Hit, KnowledgeStore
from vigil.wire.events import Message, SourceRef, Suggestion, parse

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


@pytest.fixture
async def knowledge(store: CaseStore, tmp_path: Path, embedder) -> AsyncIterator[KnowledgeStore]:  # type: ignore[no-untyped-def]
    loaded = await open_knowledge(store, tmp_path / "chroma", embedder)
    await loaded.upsert(help_centre())
    yield loaded


def customer(text: str, n: int = 1, at: datetime = NOW) -> Message:
    raw = json.dumps(
        {
            "type": "message",
            "schema_version": 1,
            "message_id": f"m{n}",
            "conversation_id": "c-1",
            "sent_at": at.isoformat(),
            "role": "customer",
            "text": text,
        }
    )
    event = parse(raw.encode(), max_event_bytes=1 << 20, max_text_bytes=1 << 16)
    assert isinstance(event, Message)
    return event


def case(status: str = "open") -> CaseState:
    return CaseState("c-1", "default", status, None, None, NOW, NOW, None, 1)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_paraphrased_faq_is_answered_from_the_faq(knowledge: KnowledgeStore):
    skill = AnswerSkill(knowledge, AnswerSettings())
    # A paraphrase, not one of the FAQ's alternates ("what day do you take payment", "wen do u take the money").
    question = "what day of the month do you collect my payment"
    assert question not in {q.lower() for e in help_centre() for q in e.questions}
    (proposal,) = await skill.propose(customer(question), case())
    # Either FAQ states the date ("Can I change the date my payment is taken?" answers with it too).
    assert proposal.sources[0].kind == "faq"
    assert proposal.sources[0].id in {"faq-bill-date", "faq-change-payment-date"}
    assert "1st" in proposal.text and 0.7 <= proposal.confidence <= 1


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_below_the_faq_confidence_the_answer_is_an_extract_of_the_best_entry(knowledge: KnowledgeStore):
    # faq_confidence 1: never an FAQ's answer whole, always the extract (a probability never reaches 1).
    skill = AnswerSkill(knowledge, AnswerSettings(faq_confidence=1.0))
    (proposal,) = await skill.propose(
        customer("my hub has a flashing amber light and no internet, what do I do?"), case()
    )
    # The entries the team's phrasings label as answering a flashing amber light (bench/data).
    assert proposal.sources[0].id in {"faq-hub-flashing-amber", "hub-lights"}
    assert len(proposal.text) <= AnswerSettings().max_chars and "amber" in proposal.text.lower()
    # The help centre says nothing on this: it still gets the nearest passage, with a confidence the gate refuses.
    (unrelated,) = await skill.propose(customer("which wine goes best with grilled salmon?", n=2), case())
    assert proposal.confidence >= AnswerSettings().min_confidence > unrelated.confidence


# Real paraphrases of the near misses, none of them an FAQ question or alternate: the entry whose telling
# words match comes before the near-miss FAQ.
NEAR_MISSES = [
    (
        "my router has a steady orange light that isn't blinking, and no internet",
        {"faq-hub-solid-amber", "no-internet-amber-light"},
        "faq-hub-flashing-amber",
    ),
    pytest.param(
        "I'm moving to another network and want to keep my phone number",
        {"faq-get-pac", "leaving-mobile-pac-stac"},
        "faq-leave-without-number",
        marks=pytest.mark.xfail(
            strict=True, reason="issue 11, open: porting a number in (port-number-in-pac) ranks first"
        ),
    ),
]
# And the other side of each pair, with the entries that answer it: right, or not stated with confidence.
NEVER_CONFIDENTLY_WRONG = [
    (
        "my router has a steady orange light that isn't blinking, and no internet",
        {"faq-hub-solid-amber", "no-internet-amber-light"},
    ),
    ("I'm moving to another network and want to keep my phone number", {"faq-get-pac", "leaving-mobile-pac-stac"}),
    (
        "the orange light on my router keeps blinking on and off, should I switch it off?",
        {"faq-hub-flashing-amber", "hub-lights"},
    ),
    (
        "switching to another network, I don't need to keep this number",
        {"faq-leave-without-number", "leaving-mobile-pac-stac"},
    ),
    pytest.param(
        "my hub light is a solid orange, does that mean it's updating?",
        {"faq-hub-solid-amber", "no-internet-amber-light", "hub-lights"},
        marks=pytest.mark.xfail(
            strict=True, reason="issue 11, open: answered from the flashing-amber FAQ at 0.99 ('updating')"
        ),
    ),
    ("leaving for another network but I want my number to come with me", {"faq-get-pac", "leaving-mobile-pac-stac"}),
]


def paraphrase(question: str) -> str:
    assert question.lower() not in {q.lower() for e in help_centre() for q in e.questions}, question
    return question


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(("question", "right", "near_miss"), NEAR_MISSES)
async def test_a_near_miss_faq_loses_to_the_entry_whose_words_match(
    knowledge: KnowledgeStore, question: str, right: set[str], near_miss: str
):
    (proposal,) = await AnswerSkill(knowledge, AnswerSettings()).propose(customer(paraphrase(question)), case())
    assert proposal.sources[0].id in right
    ranked = [h.entry_id for h in await knowledge.search(question, 5)]
    assert near_miss not in ranked[: ranked.index(proposal.sources[0].id) + 1]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(("question", "right"), NEVER_CONFIDENTLY_WRONG)
async def test_near_misses_are_answered_right_or_not_with_confidence(
    knowledge: KnowledgeStore, question: str, right: set[str]
):
    (proposal,) = await AnswerSkill(knowledge, AnswerSettings()).propose(customer(paraphrase(question)), case())
    assert proposal.sources[0].id in right or proposal.confidence < 0.8, proposal


# Real paraphrases, none of them an FAQ question or alternate, and what must come first for each: the FAQ asked in
# other words, or, for the near misses of issue 11 (solid vs flashing, keep vs leave), an entry that answers it.
IN_OTHER_WORDS = [
    ("when is the money taken from my account", {"faq-bill-date"}),
    ("what date does my direct debit go out", {"faq-bill-date"}),  # an article ranked first without the rule
    ("how do I change the name of my wifi", {"faq-change-wifi-name"}),
    ("I want to leave Brightwave mobile but I don't need my number", {"faq-leave-without-number"}),
    # Near "How do I leave Brightwave Mobile without keeping my number?" (cosine 0.91), but it asks the opposite.
    (
        "can I keep my mobile number if I leave Brightwave",
        {"faq-get-pac", "leaving-mobile-pac-stac", "leaving-brightwave"},
    ),
    (
        "my router has a steady orange light that isn't blinking, and no internet",
        {"faq-hub-solid-amber", "no-internet-amber-light"},
    ),
    ("the orange light on my router keeps blinking on and off, should I switch it off?", {"faq-hub-flashing-amber"}),
]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_an_faq_asked_in_other_words_comes_first_and_a_near_miss_does_not(knowledge: KnowledgeStore):
    skill = AnswerSkill(knowledge, AnswerSettings())
    wrong = []
    for n, (question, right) in enumerate(IN_OTHER_WORDS):
        first = (await knowledge.search(paraphrase(question), 5))[0].entry_id
        (proposal,) = await skill.propose(customer(question, n=n), case())
        if first not in right or proposal.sources[0].id != first:
            wrong.append((question, first, proposal.sources[0].id))
    assert not wrong


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_kb_search_and_the_skill_put_the_same_entry_first(knowledge: KnowledgeStore):
    skill = AnswerSkill(knowledge, AnswerSettings())
    questions = [
        "what day of the month do you collect my payment",
        "my router has a steady orange light that isn't blinking, and no internet",
        "the orange light on my hub keeps flashing, is it broken?",
        "I'm moving to another network and want to keep my phone number",
        "switching to another network, I don't need to keep this number",
        "which wine goes best with grilled salmon?",
    ]
    for n, question in enumerate(questions):
        (proposal,) = await skill.propose(customer(question, n=n), case())
        # `vigil kb search` lists five; the skill cites three: the same ranking, so the same first.
        assert proposal.sources[0].id == (await knowledge.search(question, 5))[0].entry_id, question


def test_extract_keeps_the_sentences_that_answer():
    passage = (
        "Setting up an eSIM: Installing on an iPhone\nConnect to Wi-Fi first. Open Settings > Mobile Service > "
        "Add eSIM. Scan the QR code from your email. Our shops are open until 8pm. We also sell cases."
    )
    text = extract("how do I scan the eSIM QR code on iPhone", passage, 120).text
    assert "Scan the QR code" in text and "cases" not in text and len(text) <= 120


def test_the_stated_confidence_drops_for_an_entry_dismissed_on_similar_questions_and_rises_for_an_accepted_one():
    # Hit.verdict: -0.5 is one dismissal on the same question (vigil/knowledge/verdicts.py).
    assert judged(0.977, 0.0) == 0.977
    assert judged(0.977, -0.5) < 0.9 < judged(0.977, -0.25) < 0.977 < judged(0.977, 0.5)
    assert judged(0.977, -2 / 3) < judged(0.977, -0.5)
    assert judged(0.5, -1.0) < 0.02 and judged(0.5, 1.0) > 0.98


def test_similarity_is_word_overlap():
    assert similarity("Restart the hub", "restart THE hub!") == 1.0
    assert similarity("a b", "c d") == 0.0


async def suggested(store: CaseStore, sid: str, text: str, source: str, at: datetime) -> None:
    await store.save_suggestion(
        Suggestion(
            suggestion_id=sid,
            conversation_id="c-1",
            tenant="default",
            in_reply_to="m0",
            created_at=at,
            kind="answer",
            text=text,
            confidence=0.9,
            sources=[SourceRef(kind="faq", id=source)],
            latency_ms=1.0,
        )
    )


async def test_the_policy_speaks_only_when_asked_on_open_cases(store: CaseStore):
    clock = ManualClock(NOW)
    policy = InterventionPolicy(store=store, clock=clock, settings=AnswerSettings())
    assert (await policy.admit("answer", customer("How do I set up an eSIM?"), case())).speak
    assert (await policy.admit("answer", customer("thanks!"), case())).reason == "not_a_question"
    assert (await policy.admit("answer", customer("How do I set up an eSIM?"), case("closed"))).reason == "case_closed"
    analyst = parse(
        json.dumps(
            {
                "type": "message",
                "schema_version": 1,
                "message_id": "a1",
                "conversation_id": "c-1",
                "sent_at": NOW.isoformat(),
                "role": "analyst",
                "text": "How can I help?",
            }
        ).encode(),
        max_event_bytes=1 << 20,
        max_text_bytes=1 << 16,
    )
    assert (await policy.admit("answer", analyst, case())).reason == "not_a_customer_message"
    assert (await policy.admit("next_step", analyst, case())).speak  # other kinds have their own rules


async def test_repeated_sources_and_lookalikes_are_refused(store: CaseStore):
    clock = ManualClock(NOW)
    policy = InterventionPolicy(store=store, clock=clock, settings=AnswerSettings(min_confidence=0.5))
    await suggested(store, "s1", "We take payment on the 1st of each month.", "faq-bill-date", NOW)
    clock.advance(5)
    assert (await policy.admit("answer", customer("and when is the bill issued?", 2), case())).speak
    event = customer("when is the bill issued?", 2)
    same_source = Proposal(
        kind="answer",
        text="Something else entirely",
        confidence=0.9,
        sources=(SourceRef(kind="faq", id="faq-bill-date"),),
    )
    assert (await policy.review(same_source, event, case())).reason == "repeated_source"
    lookalike = Proposal(
        kind="answer",
        text="We take payment on the 1st of each month!",
        confidence=0.9,
        sources=(SourceRef(kind="faq", id="faq-bill-issued"),),
    )
    assert (await policy.review(lookalike, event, case())).reason == "similar_to_earlier"
    unsure = Proposal(
        kind="answer",
        text="Bills are issued on the 20th.",
        confidence=0.3,
        sources=(SourceRef(kind="faq", id="faq-bill-issued"),),
    )
    assert (await policy.review(unsure, event, case())).reason == "low_confidence"
    fine = Proposal(
        kind="answer",
        text="Bills are issued on the 20th.",
        confidence=0.8,
        sources=(SourceRef(kind="faq", id="faq-bill-issued"),),
    )
    assert (await policy.review(fine, event, case())).speak


async def test_late_or_overtaken_answers_are_dropped(store: CaseStore):
    clock = ManualClock(NOW + timedelta(minutes=10))
    policy = InterventionPolicy(store=store, clock=clock, settings=AnswerSettings(max_age_s=300))
    assert policy.timely(customer("q?", at=NOW + timedelta(minutes=9)), superseded=True).reason == "superseded"
    assert policy.timely(customer("q?", at=NOW), superseded=False).reason == "stale"
    assert policy.timely(customer("q?", at=NOW + timedelta(minutes=9)), superseded=False).speak


async def test_the_policy_reads_a_conversations_suggestions_once_per_event(store: CaseStore, monkeypatch):  # type: ignore[no-untyped-def]
    reads: list[str] = []
    real = store.earlier_suggestions

    async def counted(conversation_id: str, limit: int = 20) -> list[Earlier]:
        reads.append(conversation_id)
        return await real(conversation_id, limit)

    monkeypatch.setattr(store, "earlier_suggestions", counted)
    policy = InterventionPolicy(store=store, clock=ManualClock(NOW), settings=AnswerSettings())
    event = customer("How do I set up an eSIM?", 7)
    assert (await policy.admit("answer", event, case())).speak
    for source in ("esim-setup", "faq-esim-install"):
        proposal = Proposal(
            kind="answer", text=f"see {source}", confidence=0.9, sources=(SourceRef(kind="faq", id=source),)
        )
        assert (await policy.review(proposal, event, case())).speak
    assert reads == ["c-1"]
    await policy.admit("answer", customer("And roaming?", 8), case())
    assert reads == ["c-1", "c-1"]


# ---- an answer fits the question: no "Yes." to a question that is not a yes/no one; no raw similarity -----------
@pytest.mark.parametrize(
    ("question", "yes_or_no"),
    [
        ("Can I change my Wi-Fi name?", True),
        ("hi, is there a fee for an engineer visit?", True),
        ("so does roaming cost extra in Spain", True),
        ("I'm moving next month. Will my broadband move with me?", True),
        ("How do I change my Wi-Fi name?", False),
        ("What does a flashing amber light mean?", False),
        ("rename my wifi network", False),
        ("I can't get online. What should I do?", False),  # "can't" opens a statement here, not the question
    ],
)
def test_a_yes_or_no_question_is_told_by_its_first_word(question: str, yes_or_no: bool):
    assert asks_yes_or_no(question) is yes_or_no


def test_an_answer_drops_its_yes_or_no_when_the_question_is_not_a_yes_or_no_one():
    faq = "Yes. Change it in the My Brightwave app under Hub > Wi-Fi settings."
    assert fit_to_question("How do I change my Wi-Fi name?", faq) == (
        "Change it in the My Brightwave app under Hub > Wi-Fi settings."
    )
    assert fit_to_question("Can I change my Wi-Fi name?", faq) == faq
    assert fit_to_question("which countries are in Roam Europe", "No, Turkey is not in Roam Europe.") == (
        "Turkey is not in Roam Europe."
    )
    # A sentence that starts with the word "No" is not an answer to drop.
    assert fit_to_question("what now?", "No internet? Check the cable.") == "No internet? Check the cable."
    assert fit_to_question("what now?", "Yes.") == "Yes."  # nothing would be left


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_how_question_matched_to_a_yes_faq_is_not_answered_yes(knowledge: KnowledgeStore):
    skill = AnswerSkill(knowledge, AnswerSettings())
    (how,) = await skill.propose(customer("how do I rename my wifi network?"), case())
    (can,) = await skill.propose(customer("Can I change my Wi-Fi name?", n=2), case())
    assert how.sources[0].id == can.sources[0].id == "faq-change-wifi-name"
    assert how.text.startswith("Change it in the My Brightwave app") and can.text.startswith("Yes. ")


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_why_gives_no_raw_similarity_beside_the_calibrated_confidence(knowledge: KnowledgeStore):
    (faq,) = await AnswerSkill(knowledge, AnswerSettings()).propose(customer("Can I change my Wi-Fi name?"), case())
    (article,) = await AnswerSkill(knowledge, AnswerSettings(faq_confidence=1.0)).propose(
        customer("my hub has a flashing amber light, what do I do?", n=2), case()
    )
    for proposal in (faq, article):
        assert proposal.why and not re.search(r"\d\.\d", proposal.why), proposal.why
    assert faq.sources[0].kind == "faq" and article.why.startswith("from “")


# ---- an FAQ's answer goes out whole when it is short enough, even below the FAQ confidence (issue 26) -----------
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_short_faq_answer_goes_out_whole_below_the_faq_confidence(knowledge: KnowledgeStore):
    # faq_confidence 1: never "matches the FAQ"; the FAQ is still the first hit, and its answer is short.
    skill = AnswerSkill(knowledge, AnswerSettings(faq_confidence=1.0))
    # Reported: cut to "billing only starts when your fibre goes live", the sentence with the question's words.
    question = "the engineer never showed up for my fibre install, am I paying while I wait?"
    (proposal,) = await skill.propose(customer(paraphrase(question)), case())
    faq = next(e for e in help_centre() if e.id == "faq-missed-engineer")
    assert proposal.sources[0].id == "faq-missed-engineer" and len(faq.body) <= AnswerSettings().max_chars
    assert proposal.text == faq.body  # the £30 credit, the priority rebooking and the billing, not one of them
    assert "£30 missed-appointment credit" in proposal.text and "priority" in proposal.text


def test_every_rankings_confidence_model_reads_every_feature():
    # A model fitted before a feature was added would fail on every message (and the skill would say nothing).
    hit = Hit(
        "faq-x",
        "faq",
        "How do I restart my Hub?",
        None,
        "faq-x#0",
        "How do I restart my Hub?\nSwitch it off.",
        1.0,
        0.8,
        4.0,
        question=0.9,
        dense_rank=0,
        lexical_rank=1,
    )
    for name, model in MODELS.items():
        assert 0.0 < model.probability(features("restart the hub", [hit, hit])) < 1.0, name
