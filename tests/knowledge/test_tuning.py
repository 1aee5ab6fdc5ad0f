"""What the model is tuned on and how the gate judges it: plain data and small hand-made vectors, no training."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from vigil.knowledge.documents import Entry, Passage, split_sections
from vigil.knowledge.tuning import (
    MIN_PROBES,
    Corpus,
    Pair,
    Score,
    Verdict,
    decide,
    examples,
    plan,
    rank_score,
    score,
    siblings,
    without_held_back,
)


def faq(entry_id: str, question: str, *alternates: str) -> Entry:
    return Entry(
        id=entry_id,
        kind="faq",
        title=question,
        body=f"The answer to {question}",
        origin="test",
        questions=(question, *alternates),
        passages=(Passage(id=f"{entry_id}#1", heading=None, text=f"{question}\nThe answer."),),
    )


def article(entry_id: str, title: str, body: str) -> Entry:
    return Entry(
        id=entry_id,
        kind="article",
        title=title,
        body=body,
        origin="test",
        passages=tuple(split_sections(entry_id, title, body)),
    )


ROUTER = article(
    "router",
    "Your router",
    "Intro text here.\n\n## Resetting the router\n\nHold the reset button for fifteen seconds, then wait.\n\n"
    "## Lights on the router\n\nA solid white light means the router is online.\n\n"
    "## Moving the router\n\nKeep it off the floor and away from the microwave oven.\n\n"
    "## Changing the Wi-Fi name\n\nSign in to the router's page and change the network name there.",
)


def unit(*rows: Sequence[float]) -> np.ndarray:
    vectors = np.asarray(rows, dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


# --- the pairs, and what is held back ----------------------------------------------------------------------------


def test_an_faq_with_two_or_more_alternates_holds_one_alternate_back_and_trains_on_the_rest():
    bill = faq("faq-bill", "When is my bill taken?", "what day do you take payment", "when does the dd come out")
    split = plan([bill])
    assert len(split.held_back) == 1
    held = split.held_back[0]
    assert held.question in bill.questions[1:] and held.entry_id == "faq-bill"  # never the question itself
    (kept,) = set(bill.questions[1:]) - {held.question}
    # Each question is asked for the FAQ's passage; the alternate kept is also pulled towards the FAQ's question.
    assert sorted((p.question, p.target or "") for p in split.train) == sorted(
        [(bill.questions[0], ""), (kept, ""), (kept, bill.questions[0])]
    )
    assert all(p.passage_id == "faq-bill#1" for p in split.train)


def test_an_faq_with_one_alternate_is_all_trained_on():
    split = plan([faq("faq-pay", "How do I pay?", "pay my bill")])
    assert split.held_back == []
    assert [(p.question, p.target) for p in split.train] == [
        ("How do I pay?", None),
        ("pay my bill", None),
        ("pay my bill", "How do I pay?"),
    ]


def test_the_same_knowledge_holds_back_the_same_questions():
    entries = [ROUTER, faq("a", "Question a?", "one", "two", "three"), faq("b", "Question b?", "four", "five")]
    held = {p.question for p in plan(entries).held_back}
    assert held and held == {p.question for p in plan(list(reversed(entries))).held_back}


def test_an_article_is_asked_for_by_its_title_its_headings_and_its_sections_first_sentences():
    split = plan([ROUTER])
    asked = {p.question: p.passage_id for p in [*split.train, *split.held_back]}
    assert asked["Your router"] == "router#1"
    assert asked["Resetting the router"] == "router#2"
    assert asked["Hold the reset button for fifteen seconds, then wait."] == "router#2"
    assert asked["Keep it off the floor and away from the microwave oven."] == "router#4"
    # Some headings are held back (a quarter, by a hash), never the title, never a first sentence.
    assert all(p.question in {"Resetting the router", "Lights on the router", "Moving the router",
                              "Changing the Wi-Fi name"} for p in split.held_back)  # fmt: skip
    assert split.counts["article_anchors"] == len(asked)


def test_held_back_questions_are_never_also_trained_on():
    # The alternate held back is also another FAQ's question: it is trained on there, so it cannot judge.
    bill = faq("faq-bill", "When is my bill taken?", "what day do you take payment", "when does the dd come out")
    held = plan([bill]).held_back[0].question
    split = plan([bill, faq("faq-other", held.upper(), "x")])
    assert split.held_back == []


def test_an_accepted_answer_pairs_the_question_with_its_entry_and_a_dismissed_one_is_avoided():
    entries = [faq("faq-bill", "When is my bill taken?"), faq("faq-late", "My payment is late")]
    verdicts = [
        Verdict("when will you take the money this month", "faq-bill", accepted=True),
        Verdict("when will you take the money this month", "faq-late", accepted=False),
        Verdict("i was charged twice", "faq-late", accepted=False),  # no right answer known: teaches no pair
        Verdict("something", "gone-entry", accepted=True),  # an entry no longer served
    ]
    split = plan(entries, verdicts)
    learned = [p for p in [*split.train, *split.held_back] if p.question == "when will you take the money this month"]
    assert learned == [Pair("when will you take the money this month", "faq-bill", None, ("faq-late",))]
    assert split.counts["verdicts_accepted"] == 1 and split.counts["verdicts_dismissed"] == 2


# --- hard negatives --------------------------------------------------------------------------------------------


CORPUS = Corpus(
    ids=["bill#1", "late#1", "late#2", "router#1"],
    entries=["bill", "late", "late", "router"],
    texts=["bill passage", "late passage one", "late passage two", "router passage"],
)


def test_the_hard_negative_is_the_nearest_passage_of_another_entry_below_the_margin():
    passages = unit([1, 0, 0], [0.9, 0.45, 0], [0.6, 0.8, 0], [0, 0, 1])
    question = unit([1, 0.05, 0])
    (row,) = examples([Pair("when is the bill", "bill", "bill#1")], question, CORPUS, passages)
    assert (row.anchor, row.positive, row.negative, row.entry_id) == (
        "when is the bill",
        "bill passage",
        "late passage one",
        "bill",
    )


def test_a_passage_of_another_entry_nearly_as_near_as_the_positive_is_not_a_negative():
    # late#1 is 99% as similar as the answer: as likely another right answer as a near miss.
    passages = unit([1, 0, 0], [0.99, 0.14, 0], [0.6, 0.8, 0], [0, 0, 1])
    (row,) = examples([Pair("q", "bill", "bill#1")], unit([1, 0, 0]), CORPUS, passages)
    assert row.negative == "late passage two"


def test_an_entry_an_analyst_dismissed_for_the_question_is_its_negative():
    passages = unit([1, 0, 0], [0.9, 0.45, 0], [0.6, 0.8, 0], [0.1, 0, 1])
    (row,) = examples([Pair("q", "bill", None, ("router",))], unit([1, 0, 0]), CORPUS, passages)
    assert row.negative == "router passage"


def test_an_alternate_pulled_towards_its_faqs_question_has_that_question_as_its_positive():
    passages = unit([1, 0, 0], [0.9, 0.45, 0], [0.6, 0.8, 0], [0, 0, 1])
    pair = Pair("when do you take the money", "bill", "bill#1", target="When is my bill taken?")
    (row,) = examples([pair], unit([1, 0.05, 0]), CORPUS, passages)
    assert (row.positive, row.negative) == ("When is my bill taken?", "late passage one")


def test_without_a_known_passage_the_positive_is_the_entrys_passage_nearest_the_question():
    passages = unit([1, 0, 0], [0.2, 1, 0], [0.9, 0.1, 0], [0, 0, 1])
    (row,) = examples([Pair("q", "late")], unit([1, 0, 0]), CORPUS, passages)
    # bill's passage is as near as the positive (a likely right answer too): the router's is the negative.
    assert (row.positive, row.negative) == ("late passage two", "router passage")


def test_a_pair_whose_entry_has_no_passage_or_no_other_entry_teaches_nothing():
    lonely = Corpus(ids=["bill#1"], entries=["bill"], texts=["bill passage"])
    assert examples([Pair("q", "bill", "bill#1")], unit([1, 0]), lonely, unit([1, 0])) == []
    assert examples([Pair("q", "nowhere")], unit([1, 0, 0]), CORPUS, unit(*np.eye(3)[[0, 1, 1, 2]])) == []


def test_faqs_asked_in_much_the_same_words_are_each_others_near_misses_and_others_are_not():
    solid = faq("solid", "My hub has a solid amber light", "the amber light on my hub is not flashing")
    flashing = faq("flashing", "My hub has a flashing amber light", "the amber light on my hub keeps blinking")
    refund = faq("refund", "When will I get my refund?", "how long does a refund take")
    found = siblings([solid, flashing, refund, ROUTER])
    assert found == {"solid": ("flashing",), "flashing": ("solid",)}


def test_a_near_miss_by_words_is_a_negative_of_its_own_even_when_the_shipped_model_ranks_it_alike():
    # late#1 is as near as the answer for the shipped model (never mined): its words make it a near miss all the same.
    passages = unit([1, 0, 0], [0.99, 0.14, 0], [0.6, 0.8, 0], [0, 0, 1])
    rows = examples([Pair("q", "bill", "bill#1")], unit([1, 0, 0]), CORPUS, passages, {"bill": ("late",)})
    assert [(r.positive, r.negative) for r in rows] == [
        ("bill passage", "late passage two"),
        ("bill passage", "late passage one"),
    ]


def test_a_near_miss_by_words_already_mined_is_not_taught_twice():
    passages = unit([1, 0, 0], [0.9, 0.45, 0], [0.6, 0.8, 0], [0, 0, 1])
    rows = examples([Pair("q", "bill", "bill#1")], unit([1, 0.05, 0]), CORPUS, passages, {"bill": ("late",)})
    assert [r.negative for r in rows] == ["late passage one"]


# --- the gate --------------------------------------------------------------------------------------------------


def test_an_entry_ranks_by_its_best_passage_and_the_score_is_hit_at_1_and_mrr():
    passages = unit([1, 0, 0], [0.2, 1, 0], [0.9, 0.1, 0], [0, 0, 1])
    probes = [Pair("a", "bill"), Pair("b", "late"), Pair("c", "router")]
    # a finds bill first. b is nearer late#2 (0.994) than bill (0.976): late first, by its better passage, though
    # late#1 is far. c finds bill, then late, then router: third.
    questions = unit([1, 0, 0], [0.9, 0.2, 0], [1, 0, 0.1])
    found = score(probes, questions, CORPUS, passages)
    assert found.probes == 3
    assert (found.hit_at_1, found.mrr) == pytest.approx((2 / 3, (1 + 1 + 1 / 3) / 3))


def test_the_tuned_model_is_kept_only_if_its_mrr_beats_the_shipped_ones_by_the_margin():
    shipped = Score(0.60, 0.70, 40)
    assert decide(shipped, Score(0.65, 0.75, 40), margin=0.01).accepted
    assert not decide(shipped, Score(0.60, 0.705, 40), margin=0.01).accepted  # better, but not by the margin
    assert "not 0.010 above" in decide(shipped, Score(0.60, 0.705, 40), margin=0.01).reason


def test_a_tuned_model_that_gets_fewer_first_answers_right_is_not_kept_whatever_its_mrr():
    decision = decide(Score(0.60, 0.70, 40), Score(0.55, 0.80, 40), margin=0.01)
    assert not decision.accepted and "hit@1 fell" in decision.reason


def test_too_few_held_back_questions_judge_nothing():
    decision = decide(Score(0.0, 0.0, MIN_PROBES - 1), Score(1.0, 1.0, MIN_PROBES - 1), margin=0.0)
    assert not decision.accepted and "too few" in decision.reason


def test_the_search_that_judges_sees_each_faq_without_its_held_back_alternate():
    bill = faq("faq-bill", "When is my bill taken?", "what day do you take payment", "when does the dd come out")
    split = plan([bill, ROUTER])
    (judged_bill, judged_router) = without_held_back([bill, ROUTER], split.held_back)
    held = split.held_back[0].question
    assert held not in judged_bill.questions and len(judged_bill.questions) == 2
    assert judged_router == ROUTER  # a held-back heading stays in its passage: it is the article's own text


def test_as_served_a_probe_scores_by_where_its_entry_is_in_the_ranking():
    probes = [Pair("a", "bill"), Pair("b", "late"), Pair("c", "router")]
    found = rank_score(probes, [["bill", "late"], ["bill", "router", "late"], ["bill"]])
    assert found.probes == 3
    assert (found.hit_at_1, found.mrr) == pytest.approx((1 / 3, (1 + 1 / 3 + 0) / 3))
