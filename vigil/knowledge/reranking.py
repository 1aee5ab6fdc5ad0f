"""The learned re-ranker: the fusion's first candidates put in the order a model fitted on labelled questions says.

The fusion (``fusion.py``, ``ranking.py``) adds ranks with weights tuned by hand, and measured on the team's
phrasings it puts a near miss first about one time in four: the candidates at the top agree on most words and are
near each other in the embedding, so which one is right is decided by small differences that a sum of ranks cannot
weigh. Here each of the first ``SHORTLIST`` candidates is described by a few numbers (``FEATURES``: its fused score
and place, its dense and BM25 scores and how far each is from the best among the candidates, its FAQ's nearest
question, how far the words that tell the candidates apart side with it, how much of the query its title and passage
cover) and a logistic model turns them into the probability that the candidate answers the query; the candidates
are ordered by it. The features are relative where they can be (a candidate against the best of its shortlist), so
the model carries over between help centres whose scores sit at different levels.

The model is fitted by ``python -m bench.rerank`` on the tune half of the team's labelled phrasings of two help
centres, held-out FAQ alternates and the tau2 banking dev tasks, grouped by the entry asked for so paraphrases of
one entry are never on both sides of a fold (docs/evaluation.md, "Answers never confidently wrong"): it does not
beat the fusion's order there, so it is a setting (``VIGIL_KNOWLEDGE__RERANKER=learned``), not the default. Pure:
nothing here searches, so it is cheap (a dot product per candidate) and testable without a model.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from vigil.knowledge.ranking import QUESTION_FIRST, polarities

SHORTLIST = 10
"""How many of the fusion's first candidates the model orders (the rest follow in the fusion's order)."""
FEATURES = (
    "fused",
    "reciprocal_rank",
    "dense",
    "dense_gap",
    "bm25",
    "bm25_share",
    "question",
    "question_gap",
    "asked",
    "faq",
    "agreement",
    "title_cover",
    "passage_cover",
)
"""What the model reads of each candidate (``features``)."""

_MARKUP = re.compile(r"[*_`#>|]+")


class Scored(Protocol):
    """What the re-ranker reads of a candidate (``store.Hit`` has it)."""

    @property
    def kind(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def passage(self) -> str: ...
    @property
    def score(self) -> float: ...
    @property
    def dense(self) -> float: ...
    @property
    def lexical(self) -> float: ...
    @property
    def question(self) -> float: ...
    @property
    def agreement(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Reranker:
    """A fitted logistic model over ``FEATURES``: weights per feature and a bias."""

    weights: tuple[float, ...]
    bias: float

    def __post_init__(self) -> None:
        if len(self.weights) != len(FEATURES):
            raise ValueError(f"{len(FEATURES)} weights expected, one per feature, got {len(self.weights)}")

    def probabilities(self, query: str, candidates: Sequence[Scored]) -> list[float]:
        """For each candidate (in the fusion's order), the probability that it answers ``query``."""
        return [self.probability(row) for row in features(query, candidates)]

    def order(self, query: str, candidates: Sequence[Scored]) -> list[tuple[int, float]]:
        """The first ``SHORTLIST`` candidates by probability, best first, then the rest in the fusion's order: pairs
        of (index into ``candidates``, probability; 0 for those after the shortlist). Ties keep the fusion's order."""
        head = candidates[:SHORTLIST]
        scored = sorted(enumerate(self.probabilities(query, head)), key=lambda item: (-item[1], item[0]))
        return scored + [(i, 0.0) for i in range(len(head), len(candidates))]

    def probability(self, row: Sequence[float]) -> float:
        """The probability for one candidate's ``features``."""
        z = self.bias + sum(w * x for w, x in zip(self.weights, row, strict=True))
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


def features(query: str, candidates: Sequence[Scored]) -> list[tuple[float, ...]]:
    """``FEATURES`` of each candidate, in order; relative ones against the best of ``candidates``."""
    if not candidates:
        return []
    asked = set(polarities(query))
    top_dense = max(c.dense for c in candidates)
    top_lexical = max(c.lexical for c in candidates) or 1.0
    top_question = max(c.question for c in candidates)
    rows: list[tuple[float, ...]] = []
    for rank, c in enumerate(candidates):
        rows.append(
            (
                c.score,
                1.0 / (1 + rank),
                c.dense,
                c.dense - top_dense,
                math.log1p(c.lexical),
                c.lexical / top_lexical,
                c.question,
                c.question - top_question if c.kind == "faq" else -1.0,
                float(c.kind == "faq" and c.question >= QUESTION_FIRST),
                float(c.kind == "faq"),
                c.agreement,
                _cover(asked, c.title),
                _cover(asked, c.passage),
            )
        )
    return rows


def _cover(asked: set[str], text: str) -> float:
    """The share of the query's content words (stemmed) that ``text`` says."""
    if not asked:
        return 0.0
    return len(asked & set(polarities(_MARKUP.sub(" ", text)))) / len(asked)


# Fitted by `python -m bench.rerank` on the tune side as it was before issue 26's new phrasings (213 shortlists); its
# cross-validation on all 350 is in docs/evaluation.md ("Answers never confidently wrong"). The order of ``FEATURES``.
MODEL = Reranker(
    weights=(2.136, 0.959, 1.262, 0.849, 0.447, 0.157, 1.541, 2.217, 1.015, -1.938, 2.121, -0.155, -0.419),
    bias=-2.719,
)
