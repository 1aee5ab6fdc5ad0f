"""The one ranking of knowledge entries for a query: what `vigil kb search` lists and what the answer skill answers
from, FAQ or article.

Two stages.

1. Weighted reciprocal-rank fusion of three rankings: passages by dense similarity, passages by BM25, and FAQs by
   the nearest of their questions and alternates. An entry ranks where its best passage does, plus its questions'
   share. Ranks, not scores, are fused: cosine and BM25 are on different scales, and the ranks are robust to both.
2. The near-miss check. The entries at the top of the fusion are usually about the same thing ("solid amber light"
   and "flashing amber light"; "keep my number" and "leave without my number"), so their vectors and most of their
   words agree, and what tells them apart is a few words. Among the first ``RERANK`` candidates, every word of the
   query that the candidates do not all say alike moves them: a candidate that says it gains, one that negates it
   ("not flashing", "without keeping my number") loses, and the reverse when the query negates it ("steady, not
   blinking"). Nothing here knows the help centre's words: which words separate the candidates is read from the
   candidates themselves, and negation from the grammar of both sides.

The agreement of each candidate is kept on its hit: the answer skill's confidence uses it, so a near miss that the
words contradict is not stated with confidence. How far it also moves the order is ``AGREEMENT_WEIGHT``: measured on
the team's phrasings, a bag of words moves as many right answers down as up ("lost my job" is not "lost my phone"),
so it is 0 and the order is the fusion's (docs/evaluation.md has the sweep). Likewise ``QUESTION_WEIGHT``: an FAQ's
nearest question is a feature of the confidence but, as a third ranking in the fusion, it lost.

One exception to the fusion's order: a query that is one of an FAQ's questions or alternates, or nearly
(``question_first``: its nearest question at cosine ``QUESTION_FIRST`` or more, ahead of every other FAQ's by
``QUESTION_LEAD``), puts that FAQ first. The FAQ was written for that question; a longer article that shares more of
its words ("wen do u take the money" and the refunds article) must not outrank it. The lead keeps most near misses out:
two FAQs about the amber light have questions about as near to the query as each other, so the rule does not fire
and the fusion decides; and where the words that tell the FAQ from its near misses side against it (its agreement is
below ``QUESTION_VETO``: "keep my number if I leave" against "leave without keeping my number"), it does not fire
either.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vigil.knowledge.lexical import stem

# Weights of the rankings in the fusion. Dense and lexical: tuned on the tau2 banking dev tasks; questions, the
# question-first rule and the near-miss stage: on the tune half of the team's Brightwave phrasings (with, for the
# rule, the held-out alternates of the tune half's FAQs) (`python -m bench.eval_phrasings --split tune --grid`;
# docs/evaluation.md).
RRF_K = 5
DENSE_WEIGHT = 0.7
LEXICAL_WEIGHT = 1.0
QUESTION_WEIGHT = 0.0
QUESTION_FIRST = 0.75
"""An FAQ whose nearest question is at least this near the query (cosine) comes first, if ``QUESTION_LEAD`` ahead."""
QUESTION_LEAD = 0.1
"""How far the FAQ's nearest question must be ahead of the nearest question of any other FAQ."""
QUESTION_VETO = -0.1
"""An agreement below this (the words that tell the FAQ from its near misses side against it) keeps it from being put
first (-1 or less: never)."""
RERANK = 5
"""How many of the fusion's first candidates the near-miss stage compares."""
AGREEMENT_WEIGHT = 0.0
"""How far a full agreement moves a candidate, in units of the first candidate's fused score."""
NEAR = 0.15
"""How alike two candidates' words must be (cosine) for the near-miss stage to compare them."""

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[.,;:!?()\n]")
_HYPHENATED = re.compile(r"(?<=\w)-(?=\w)")
_NEGATORS = frozenset(
    "not no never without nor cannot dont doesnt didnt isnt arent wasnt werent wont cant couldnt shouldnt wouldnt "
    "havent hasnt hadnt aint neither instead".split()
)
# Words that end a negation's reach: "not the payment, the actual bill", "don't change the password, just the name".
_SCOPE_ENDS = frozenset("but just only rather than though although however whereas while".split())
_SCOPE = 3
"""How many content words a negation reaches."""
_STOP = frozenset(
    "a an the and or if of to in on at by for with from as into onto about is are was were be been being am do does "
    "did doing has have had having i im i'm ive i've me my mine myself you your yours we our ours us he him his she "
    "her it its it's they them their this that these those there here what which who whom whose when where why how "
    "can could would should will shall may might must so too very also then than up down out over again once all any "
    "some such own same each other more most both few please hi hello thanks thank ok okay yes yeah hey get got "
    "one just".split()
)


@dataclass(frozen=True, slots=True)
class Candidate:
    """An entry the fusion found: its fused score and the words it says, for the near-miss stage."""

    entry_id: str
    fused: float
    text: str
    """What the entry says about itself: title, FAQ questions and alternates, and its best passage."""


@dataclass(frozen=True, slots=True)
class Ranked:
    """A candidate's place after the near-miss stage."""

    entry_id: str
    score: float
    agreement: float
    """How far the words that tell the candidates apart side with this one, in -1..1 (0: no such word)."""


def rrf_share(rank: int, weight: float) -> float:
    """A ranking's share of the fused score for an item at ``rank`` (0 is first)."""
    return weight / (RRF_K + rank + 1)


def question_first(nearest: Mapping[str, float]) -> str | None:
    """The FAQ that the query asks nearly word for word, if one does: ``nearest`` maps each FAQ to the cosine of its
    nearest question or alternate. Its best must be ``QUESTION_FIRST`` or more and ``QUESTION_LEAD`` ahead of the
    next FAQ's."""
    ordered = sorted(nearest.items(), key=lambda item: -item[1])
    if not ordered:
        return None
    entry_id, best = ordered[0]
    runner_up = ordered[1][1] if len(ordered) > 1 else 0.0
    return entry_id if best >= QUESTION_FIRST and best - runner_up >= QUESTION_LEAD else None


def rerank(query: str, candidates: Sequence[Candidate], *, first: str | None = None) -> list[Ranked]:
    """``candidates`` (in fused order) in their final order: the first ``RERANK`` moved by their agreement with the
    query's distinguishing words, the rest after them as fused. ``first`` (``question_first``'s FAQ), when among
    the candidates, is placed first at the first's score, unless the words that tell it from its near misses side
    against it (its agreement is below ``QUESTION_VETO``: "keep my number if I leave" is near "leave without keeping
    my number").
    """
    ordered = sorted(candidates, key=lambda c: (c.entry_id != first, -c.fused))
    head, tail = ordered[:RERANK], ordered[RERANK:]
    if not head:
        return []
    top = max(c.fused for c in head) or 1.0
    agreements = agreement(query, [c.text for c in head])
    if first is not None and head[0].entry_id == first and agreements[0] < QUESTION_VETO:
        first = None  # the words that tell it from its near misses say otherwise: the fusion decides
    ranked = sorted(
        (Ranked(c.entry_id, c.fused / top + AGREEMENT_WEIGHT * a, a) for c, a in zip(head, agreements, strict=True)),
        key=lambda r: (r.entry_id != first, -r.score),
    )
    if ranked[0].entry_id == first and len(ranked) > 1:
        ranked[0] = Ranked(first, max(r.score for r in ranked), ranked[0].agreement)
    return ranked + [Ranked(c.entry_id, c.fused / top, 0.0) for c in tail]


def agreement(query: str, texts: Sequence[str]) -> list[float]:
    """For each text, how far the query's words side with it rather than with its near misses.

    Each word has a polarity: 1 said, -1 negated, in between for both, 0 unsaid. A text's match with the query is the
    cosine of their polarity vectors (so a long article that says every word once is not favoured over a short FAQ
    that says the telling one). Its near misses are the other texts that say much the same (their words' cosine at
    least ``NEAR``): two FAQs about the amber light, or about leaving with and without the number. Its agreement is
    its match minus the mean match of it and its near misses, so the words they all say alike cancel out and only the
    ones that tell them apart count; a text with no near miss has none (0): its words are not compared with those of
    entries about something else, which a bag of words would often get wrong ("lost my job" is not "lost my phone").
    """
    asked = polarities(query)
    if not asked or len(texts) < 2:
        return [0.0] * len(texts)
    said = [polarities(text) for text in texts]
    matches = [_cosine(asked, s) for s in said]
    scores = []
    for i, mine in enumerate(said):
        near = [j for j, other in enumerate(said) if j != i and _cosine(mine, other, absolute=True) >= NEAR]
        scores.append(matches[i] - sum(matches[j] for j in [i, *near]) / (1 + len(near)) if near else 0.0)
    return scores


def overlap(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """How much two texts' ``polarities`` say the same words, said or negated (the near-miss stage's ``NEAR``)."""
    return _cosine(a, b, absolute=True)


def _cosine(a: Mapping[str, float], b: Mapping[str, float], *, absolute: bool = False) -> float:
    """The cosine of two polarity vectors; with ``absolute``, of the words alone (what they are about, not whether
    they are said or negated)."""
    size = math.hypot(*a.values()) * math.hypot(*b.values())
    if size == 0:
        return 0.0
    if len(b) < len(a):
        a, b = b, a  # both are symmetric: walk the shorter (a question's few words, not a passage's hundred)
    if absolute:
        return sum(abs(v) * abs(b.get(w, 0.0)) for w, v in a.items() if w in b) / size
    return sum(v * b.get(w, 0.0) for w, v in a.items() if w in b) / size


@functools.lru_cache(maxsize=4096)
def polarities(text: str) -> Mapping[str, float]:
    """The stemmed content words of ``text``, each with its polarity: 1 when only said, -1 when only negated
    ("not flashing", "without keeping my number", "don't unplug it"), the balance when both."""
    said: dict[str, int] = {}
    negated: dict[str, int] = {}
    reach = 0
    for token in _TOKEN.findall(_HYPHENATED.sub("", text.lower().replace("\u2019", "'"))):
        word = token.replace("'", "")
        if not word[0].isalnum() or word in _SCOPE_ENDS:
            reach = 0
            continue
        if word in _NEGATORS or token.endswith("n't"):
            reach = _SCOPE
            continue
        if word in _STOP or token in _STOP or len(word) < 2:
            continue
        stemmed = stem(word)
        if reach > 0:
            negated[stemmed] = negated.get(stemmed, 0) + 1
            reach -= 1
        else:
            said[stemmed] = said.get(stemmed, 0) + 1
    return {
        w: (said.get(w, 0) - negated.get(w, 0)) / (said.get(w, 0) + negated.get(w, 0)) for w in said.keys() | negated
    }
