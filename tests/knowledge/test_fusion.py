"""Ranking pieces for long queries: sentences, reciprocal-rank fusion, RM3, passages folded into entries."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from vigil.knowledge.fusion import (
    Expansion,
    Rankings,
    Recipe,
    aggregate,
    expanded_search,
    fuse,
    passage_scores,
    rank,
    reciprocal_rank,
    rm3,
    sentences,
)
from vigil.knowledge.lexical import LexicalIndex, analyse

ROOT = Path(__file__).parent.parent.parent

# A situation written the way tau2-bench writes its customers' (role, situation, markdown instructions).
SITUATION = """**Your character:** Dana Okafor, a 41-year-old nurse from Leeds. You are patient but tired.

**Your situation:** Your broadband has dropped every evening since Tuesday. The router light is flashing orange, \
not solid. You already restarted it twice, e.g. by pulling the plug for 30 seconds. Ok.

## How to Behave

1. **Start naturally:** Say "My internet keeps cutting out at night." Don't give your account number unless asked.
2. **Answer questions, don't anticipate them.**
- Never respond as the agent.
"""


def test_a_situation_is_split_into_its_sentences_without_markup() -> None:
    assert sentences(SITUATION) == [
        "Your character: Dana Okafor, a 41-year-old nurse from Leeds.",
        "You are patient but tired.",
        "Your situation: Your broadband has dropped every evening since Tuesday.",
        "The router light is flashing orange, not solid.",
        "You already restarted it twice, e.g. by pulling the plug for 30 seconds.",
        # "Ok." is below min_words
        "How to Behave",
        'Start naturally: Say "My internet keeps cutting out at night."',
        "Don't give your account number unless asked.",
        "Answer questions, don't anticipate them.",
        "Never respond as the agent.",
    ]


def test_short_words_and_abbreviations_do_not_end_a_sentence() -> None:
    assert sentences("Dr. Smith said so. Then I called, i.e. twice, and waited.") == [
        "Dr. Smith said so.",
        "Then I called, i.e. twice, and waited.",
    ]


def test_a_short_question_is_one_sentence_and_never_lost() -> None:
    text = (ROOT / "bench" / "data" / "brightwave-phrasings.jsonl").read_text("utf-8")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    for row in rows:
        found = sentences(row["text"])
        assert found, row["text"]
        assert set(" ".join(found).split()) <= set(row["text"].replace("*", "").split()), row["text"]
    assert sentences("esim?") == ["esim?"]
    assert sentences("   ") == []


def test_reciprocal_rank_gives_each_rank_its_share() -> None:
    assert reciprocal_rank(["a", "b", "a"], k=5, weight=0.7) == {"a": 0.7 / 6, "b": 0.7 / 7}
    with pytest.raises(ValueError, match="negative"):
        reciprocal_rank(["a"], k=-1)


def test_fuse_adds_and_scales() -> None:
    assert fuse([{"a": 1.0, "b": 2.0}, {"a": 3.0}], scale=0.5) == {"a": 2.0, "b": 1.0}


def test_rm3_interpolates_the_query_with_the_relevance_model() -> None:
    query = ["card", "fee"]
    feedback = [(["card", "annual", "annual", "fee"], 3.0), (["card", "limit"], 1.0)]
    # P(w|R) ∝ Σ score · tf/|d|: annual 3·2/4 = 1.5; card 3·1/4 + 1·1/2 = 1.25; fee 3·1/4 = 0.75; limit 1·1/2 = 0.5
    weights = rm3(query, feedback, terms=3, original_weight=0.6)
    kept = {"annual": 1.5 / 3.5, "card": 1.25 / 3.5, "fee": 0.75 / 3.5}  # the three most likely, renormalised
    expected = {
        "card": 0.6 * 0.5 + 0.4 * kept["card"],
        "fee": 0.6 * 0.5 + 0.4 * kept["fee"],
        "annual": 0.4 * kept["annual"],
    }
    assert weights.keys() == expected.keys()
    for word, weight in expected.items():
        assert weights[word] == pytest.approx(weight)
    assert sum(weights.values()) == pytest.approx(1.0)
    assert "limit" not in weights  # the fourth word is cut by terms=3


def test_rm3_without_feedback_is_the_query_alone() -> None:
    assert rm3(["card", "card", "fee"], [], terms=5) == pytest.approx({"card": 2 / 3, "fee": 1 / 3})
    assert rm3([], [(["card"], 1.0)]) == {}
    with pytest.raises(ValueError, match="original_weight"):
        rm3(["card"], [], original_weight=1.5)


OWNER = {"a#1": "a", "a#2": "a", "a#3": "a", "b#1": "b", "gone#1": None}


def test_max_ranks_an_entry_by_its_best_passage() -> None:
    scores = {"a#1": 0.5, "a#2": 0.45, "a#3": 0.4, "b#1": 0.6, "gone#1": 0.9}
    assert aggregate(scores, OWNER.get, rule="max") == [("b", 0.6), ("a", 0.5)]


def test_sum_and_softmax_rank_several_strong_passages_above_one() -> None:
    scores = {"a#1": 0.5, "a#2": 0.45, "a#3": 0.4, "b#1": 0.6}
    assert [e for e, _ in aggregate(scores, OWNER.get, rule="sum", top=3)] == ["a", "b"]
    assert dict(aggregate(scores, OWNER.get, rule="sum", top=2))["a"] == pytest.approx(0.95)
    soft = dict(aggregate(scores, OWNER.get, rule="softmax", top=3, temperature=0.5))
    expected = 0.6 * 0.5 * math.log(sum(math.exp(s / 0.6 / 0.5) for s in (0.5, 0.45, 0.4)))
    assert soft["a"] == pytest.approx(expected)
    assert soft["a"] > soft["b"]
    # a low temperature is the maximum again
    cold = dict(aggregate(scores, OWNER.get, rule="softmax", top=3, temperature=0.001))
    assert cold["b"] > cold["a"] == pytest.approx(0.5, abs=1e-3)


def test_rank_fuses_whole_query_sentences_and_titles() -> None:
    owner = {"a#1": "a", "b#1": "b", "c#1": "c"}.get
    whole = Rankings(dense=["a#1", "b#1"], lexical=["a#1", "b#1"])
    parts = [Rankings(dense=["c#1"], lexical=["c#1"]), Rankings(dense=["c#1"], lexical=["b#1"])]
    shipped = Recipe()
    assert [e for e, _ in rank(whole, parts, owner, shipped)] == ["a", "b"]  # sentences are off by default
    with_sentences = Recipe(sentence_weight=4.0)
    scores = passage_scores(whole, parts, with_sentences)
    assert scores["c#1"] == pytest.approx(4.0 * (0.7 / 6 + 1 / 6 + 0.7 / 6) / 2)
    assert next(e for e, _ in rank(whole, parts, owner, with_sentences)) == "c"
    titled = rank(whole, [], owner, Recipe(title_weight=2.0), titles=["b", "a"])
    assert [e for e, _ in titled] == ["b", "a"]  # b's title ranks first, and outweighs a's better passage
    assert dict(titled)["b"] == pytest.approx(0.7 / 7 + 1 / 7 + 2 / 6)


def test_weighted_bm25_scales_each_word() -> None:
    index = LexicalIndex(["x", "y"], ["annual fee waived", "card limit raised"])
    single = {h.passage_id: h.score for h in index.search("fee", 5)}
    weighted = {h.passage_id: h.score for h in index.search_weighted({"fee": 2.0, "nowhere": 5.0}, 5)}
    assert weighted == pytest.approx({pid: 2 * score for pid, score in single.items()})
    assert index.search_weighted({}, 5) == []


def test_rm3_finds_a_passage_sharing_only_the_feedback_words() -> None:
    texts = {
        "fee#1": "Annual fee: the gold card has an annual fee of 95 dollars, waived the first year.",
        "fee#2": "Annual fee refunds: an annual fee is refunded if the card is closed within 30 days.",
        "waiver#1": "Waived the first year: waived charges are listed on the statement as waived.",
        "other#1": "Opening a checking account needs two forms of identity.",
    }
    index = LexicalIndex(list(texts), list(texts.values()))
    plain = [h.passage_id for h in index.search("annual fee", 10)]
    assert "waiver#1" not in plain
    expanded = expanded_search(index, "annual fee", texts.__getitem__, Expansion(documents=2, terms=20), 10)
    assert "waiver#1" in [h.passage_id for h in expanded]
    assert "other#1" not in [h.passage_id for h in expanded]
    assert analyse("Annual fees, waived!") == ["annual", "fee", "waiv"]
