"""Ranking pieces for long, situation-style queries: sentences, rank fusion, RM3 expansion, passages to entries.

A customer's situation (or an analyst's paste of a whole conversation) is long and mixes the request with asides;
the embedding model reads only its first 256 word pieces, and one BM25 query over it lets frequent words drown the
telling ones. What the retrieval literature does about it, each as one small function here:

- ``sentences``: split the text into sentences, each searched on its own, their rankings fused (so a request in
  the tenth sentence is not cut off, and each sentence's words are weighed against each other, not against 600);
- ``reciprocal_rank`` and ``fuse``: weighted reciprocal-rank fusion of any number of rankings;
- ``rm3``: pseudo-relevance feedback (RM3, as Anserini implements it) - the query's words, re-weighted and joined
  by the words most typical of the first documents it finds;
- ``aggregate``: a passage ranking folded into an entry ranking by the best passage (``max``), the sum of the best
  few (``sum``), or a soft maximum of them (``softmax``), so an entry with several good passages can outrank one
  with a single slightly better one;
- ``rank``: all of them together under one ``Recipe`` (its defaults are today's search: dense and BM25, k 5,
  dense weight 0.7, best passage per entry).

Everything here works on ids and scores the store already has (passage ids from Chroma and the lexical index, the
entry of each passage, entry titles); nothing here searches, so it is cheap and testable without a model.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from vigil.knowledge.lexical import LexicalHit, LexicalIndex, analyse

Rule = Literal["max", "sum", "softmax"]

_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,2}[.)])\s+")
_MARKUP = re.compile(r"[*_`#>|]+")
# A sentence ends at ., ! or ? (and any closing quote or bracket) before a space and what may start a sentence.
_BOUNDARY = re.compile(r"[.!?][\"'\u201d\u2019)\]]*(?=\s+[\"'\u201c\u2018(\[]?[A-Z0-9$])")
_ABBREVIATION = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|mr|mrs|ms|dr|st|no|approx)|\b[A-Z])\.$", re.IGNORECASE)


def sentences(text: str, *, min_words: int = 3) -> list[str]:
    """The sentences of ``text`` with at least ``min_words`` words, Markdown emphasis, headings and list markers
    removed; lines are never joined (a list item or heading is a sentence of its own). A text with no such sentence
    (a short question) is returned whole, stripped, so a caller can always search its sentences."""
    found: list[str] = []
    for raw in text.splitlines():
        line = _MARKUP.sub("", _BULLET.sub("", raw)).strip()
        if not line:
            continue
        pieces: list[str] = []
        for piece in _split(line):
            if pieces and _ABBREVIATION.search(pieces[-1]):
                pieces[-1] = f"{pieces[-1]} {piece}"  # "e.g. 'Blue Account'" is one sentence
            else:
                pieces.append(piece)
        found.extend(p.strip() for p in pieces if len(p.split()) >= min_words)
    if not found and text.strip():
        return [" ".join(_MARKUP.sub("", text).split())]
    return found


def _split(line: str) -> list[str]:
    """``line`` cut after each sentence end (the closing quote or bracket stays with its sentence)."""
    pieces: list[str] = []
    start = 0
    for end in _BOUNDARY.finditer(line):
        pieces.append(line[start : end.end()])
        start = end.end()
    pieces.append(line[start:])
    return [p.strip() for p in pieces if p.strip()]


def reciprocal_rank(ranking: Sequence[str], *, k: float, weight: float = 1.0) -> dict[str, float]:
    """``weight / (k + rank)`` for each item of a ranking (best first, rank 1): its share of a reciprocal-rank
    fusion (Cormack et al., 2009). A smaller ``k`` gives the first few ranks more say."""
    if k < 0:
        raise ValueError("k must not be negative")
    scores: dict[str, float] = {}
    for rank, item in enumerate(ranking, start=1):
        if item not in scores:  # an item listed twice counts at its better rank
            scores[item] = weight / (k + rank)
    return scores


def fuse(parts: Iterable[Mapping[str, float]], *, scale: float = 1.0) -> dict[str, float]:
    """The sum of several score maps (an item missing from one scores 0 there), times ``scale``: with
    ``scale = 1 / len(parts)`` the mean, so many sentences weigh together as much as one query."""
    total: dict[str, float] = defaultdict(float)
    for part in parts:
        for item, score in part.items():
            total[item] += score * scale
    return dict(total)


def rm3(
    query: Sequence[str],
    feedback: Sequence[tuple[Sequence[str], float]],
    *,
    terms: int = 10,
    original_weight: float = 0.5,
) -> dict[str, float]:
    """RM3 pseudo-relevance feedback (Lavrenko and Croft's relevance model, interpolated with the query, as in
    Anserini): the weighted query to search again with.

    ``query`` is the query's analysed words; ``feedback`` the first documents it retrieved, each as its analysed
    words with its retrieval score (> 0). The relevance model is P(w|R) ∝ Σ_d score(d) · tf(w, d) / |d|; its
    ``terms`` most likely words are kept and renormalised, and the result is
    ``original_weight`` · P(w|Q) + (1 - ``original_weight``) · P(w|R), with P(w|Q) the query's own word
    frequencies. Weights sum to 1 (or the query alone when there is no usable feedback).
    """
    if not 0.0 <= original_weight <= 1.0:
        raise ValueError("original_weight must be between 0 and 1")
    if terms < 1:
        raise ValueError("terms must be at least 1")
    counts = Counter(query)
    if not counts:
        return {}
    original = {word: count / len(query) for word, count in counts.items()}
    relevance: dict[str, float] = defaultdict(float)
    for words, score in feedback:
        if not words or score <= 0:
            continue
        for word, count in Counter(words).items():
            relevance[word] += score * count / len(words)
    if not relevance:
        return original
    kept = sorted(relevance.items(), key=lambda item: (-item[1], item[0]))[:terms]
    mass = sum(weight for _, weight in kept)
    expanded: dict[str, float] = defaultdict(float)
    for word, weight in original.items():
        expanded[word] += original_weight * weight
    for word, weight in kept:
        expanded[word] += (1.0 - original_weight) * weight / mass
    return dict(expanded)


def aggregate(
    scores: Mapping[str, float],
    entry_of: Callable[[str], str | None],
    *,
    rule: Rule = "max",
    top: int = 3,
    temperature: float = 0.1,
) -> list[tuple[str, float]]:
    """Passage scores folded into entry scores, best entry first (ties: by entry id).

    Each entry is scored from its ``top`` best passages: ``max`` keeps the best; ``sum`` adds them up; ``softmax``
    is the soft maximum T · log Σ exp(s / T) of the scores divided by the best passage score of the whole query (so
    ``temperature`` T is scale-free: near 0 it is ``max``, larger lets second and third passages count). Passages
    whose entry is unknown (``entry_of`` returns None: removed, or not visible) are skipped.
    """
    if top < 1:
        raise ValueError("top must be at least 1")
    if rule == "softmax" and temperature <= 0:
        raise ValueError("temperature must be positive")
    grouped: dict[str, list[float]] = defaultdict(list)
    for passage, score in scores.items():
        entry = entry_of(passage)
        if entry is not None:
            grouped[entry].append(score)
    if not grouped:
        return []
    best = max(max(values) for values in grouped.values())
    unit = best if best > 0 else 1.0
    folded: dict[str, float] = {}
    for entry, values in grouped.items():
        strongest = sorted(values, reverse=True)[:top]
        if rule == "max":
            folded[entry] = strongest[0]
        elif rule == "sum":
            folded[entry] = sum(strongest)
        else:
            peak = strongest[0] / unit
            soft = peak + temperature * math.log(sum(math.exp((s / unit - peak) / temperature) for s in strongest))
            folded[entry] = soft * unit
    return sorted(folded.items(), key=lambda item: (-item[1], item[0]))


@dataclass(frozen=True, slots=True)
class Rankings:
    """One query's passage rankings, best first: by the embedding (dense) and by BM25 (lexical)."""

    dense: Sequence[str] = ()
    lexical: Sequence[str] = ()


@dataclass(frozen=True, slots=True)
class Expansion:
    """RM3's parameters: how many first passages feed back, how many words are added, the query's own weight."""

    documents: int = 10
    terms: int = 10
    original_weight: float = 0.5


@dataclass(frozen=True, slots=True)
class Recipe:
    """How ``rank`` fuses a query's rankings. The defaults are the search vigil has shipped (dense and BM25 of the
    whole query, RRF k 5, dense weight 0.7, best passage per entry)."""

    rrf_k: float = 5.0
    dense_weight: float = 0.7
    lexical_weight: float = 1.0
    sentence_weight: float = 0.0
    """Weight of the per-sentence rankings (their mean) beside the whole query's, which always weigh 1."""
    title_weight: float = 0.0
    """Weight of a BM25 ranking of entry titles, added to the entry scores after aggregation."""
    rule: Rule = "max"
    top: int = 3
    temperature: float = 0.1
    expansion: Expansion | None = None
    """RM3 on the whole query's BM25 ranking (the caller searches with the expanded query); None: no feedback."""


# The recipe the cross-validation chose (docs/evaluation.md "Retrieval": tau2 banking hit@5 0.872, recall@10 0.332,
# MRR 0.595 held out, against 0.803 / 0.309 / 0.555 for the hybrid alone; Brightwave phrasings hit@1 0.734 -> 0.768).
CROSS_VALIDATED = Recipe(rrf_k=5, dense_weight=0.7, sentence_weight=4.0, title_weight=0.5, rule="sum", top=3)


def expanded_search(
    index: LexicalIndex,
    query: str,
    text_of: Callable[[str], str],
    expansion: Expansion,
    k: int,
    *,
    only: np.ndarray | None = None,
) -> list[LexicalHit]:
    """BM25 with RM3: ``query`` searched, its ``expansion.documents`` first passages (``text_of`` gives a passage's
    text) fed back through ``rm3``, and the weighted query searched again for the ``k`` best passages."""
    first = index.search(query, max(k, expansion.documents), only=only)
    if not first:
        return []
    feedback = [(analyse(text_of(hit.passage_id)), hit.score) for hit in first[: expansion.documents]]
    weights = rm3(analyse(query), feedback, terms=expansion.terms, original_weight=expansion.original_weight)
    return index.search_weighted(weights, k, only=only)


def passage_scores(whole: Rankings, parts: Sequence[Rankings], recipe: Recipe) -> dict[str, float]:
    """The fused passage scores of a query: its whole-text rankings, and the mean of its sentences' rankings
    weighted by ``recipe.sentence_weight``."""

    def one(rankings: Rankings) -> dict[str, float]:
        return fuse(
            [
                reciprocal_rank(rankings.dense, k=recipe.rrf_k, weight=recipe.dense_weight),
                reciprocal_rank(rankings.lexical, k=recipe.rrf_k, weight=recipe.lexical_weight),
            ]
        )

    pieces = [one(whole)]
    if recipe.sentence_weight > 0 and parts:
        pieces.append(fuse([one(p) for p in parts], scale=recipe.sentence_weight / len(parts)))
    return fuse(pieces)


def rank(
    whole: Rankings,
    parts: Sequence[Rankings],
    entry_of: Callable[[str], str | None],
    recipe: Recipe,
    *,
    titles: Sequence[str] = (),
) -> list[tuple[str, float]]:
    """Entries, best first, with their scores: the passages fused (``passage_scores``), folded per entry
    (``aggregate``), and a title ranking (``titles``: entry ids, best first) added with ``recipe.title_weight``."""
    return entry_scores(passage_scores(whole, parts, recipe), entry_of, recipe, titles=titles)


def entry_scores(
    passages: Mapping[str, float],
    entry_of: Callable[[str], str | None],
    recipe: Recipe,
    *,
    titles: Sequence[str] = (),
) -> list[tuple[str, float]]:
    """``rank`` from fused passage scores (``passage_scores``): folded per entry, the title ranking added."""
    entries = aggregate(passages, entry_of, rule=recipe.rule, top=recipe.top, temperature=recipe.temperature)
    if recipe.title_weight <= 0 or not titles:
        return entries
    known = dict(entries)
    boost = reciprocal_rank(titles, k=recipe.rrf_k, weight=recipe.title_weight)
    combined = {entry: known.get(entry, 0.0) + boost.get(entry, 0.0) for entry in known.keys() | boost.keys()}
    return sorted(combined.items(), key=lambda item: (-item[1], item[0]))
