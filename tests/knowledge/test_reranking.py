"""The learned re-ranker: each of the fusion's first candidates described by a few numbers, ordered by a fitted
logistic model, the rest left in the fusion's order."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from vigil.knowledge import reranking
from vigil.knowledge.reranking import FEATURES, SHORTLIST, Reranker, features


@dataclass(frozen=True)
class Found:
    kind: str = "article"
    title: str = ""
    passage: str = ""
    score: float = 1.0
    dense: float = 0.5
    lexical: float = 5.0
    question: float = 0.0
    agreement: float = 0.0


def only(name: str, weight: float = 1.0) -> Reranker:
    """A model that reads one feature."""
    return Reranker(tuple(weight if n == name else 0.0 for n in FEATURES), 0.0)


def test_scores_are_read_against_the_best_of_the_shortlist():
    rows = features(
        "solid amber light",
        [Found(dense=0.8, lexical=8.0), Found(kind="faq", dense=0.6, lexical=2.0, question=0.9)],
    )
    first, second = (dict(zip(FEATURES, row, strict=True)) for row in rows)
    assert first["dense_gap"] == 0.0 and second["dense_gap"] == pytest.approx(-0.2)
    assert first["bm25_share"] == 1.0 and second["bm25_share"] == pytest.approx(0.25)
    assert second["faq"] == 1.0 and second["asked"] == 1.0 and second["question_gap"] == 0.0
    assert first["faq"] == 0.0 and first["question_gap"] == -1.0  # an article has no question to be near
    assert first["reciprocal_rank"] == 1.0 and second["reciprocal_rank"] == 0.5


def test_cover_is_the_share_of_the_query_words_a_text_says():
    (row,) = features("my hub light is flashing amber", [Found(title="Amber light on the Hub", passage="Flashing")])
    named = dict(zip(FEATURES, row, strict=True))
    assert named["title_cover"] == pytest.approx(3 / 4)  # hub, light, amber of hub, light, flash, amber
    assert named["passage_cover"] == pytest.approx(1 / 4)


def test_the_shortlist_is_ordered_by_the_model_and_the_rest_keep_the_fusions_order():
    candidates = [Found(agreement=a) for a in [-0.5, 0.5, 0.0]] + [Found(agreement=1.0)] * (SHORTLIST - 1)
    order = only("agreement").order("q", candidates)
    assert [i for i, _ in order[:3]] == [3, 4, 5]  # the best of the shortlist first, ties in the fusion's order
    assert [i for i, p in order[SHORTLIST:]] == [SHORTLIST, SHORTLIST + 1] and all(
        p == 0.0 for _, p in order[SHORTLIST:]
    )
    assert len(order) == len(candidates)


def test_a_model_must_weigh_every_feature():
    with pytest.raises(ValueError, match="one per feature"):
        Reranker((1.0,), 0.0)


def test_the_shipped_model_prefers_the_candidate_the_distinguishing_words_side_with():
    asked = "steady orange light on my hub"
    flashing = Found(kind="faq", title="Flashing amber light", question=0.8, agreement=-0.3)
    solid = Found(kind="faq", title="Solid amber light", question=0.78, agreement=0.3, score=0.9)
    order = reranking.MODEL.order(asked, [flashing, solid])
    assert order[0][0] == 1
