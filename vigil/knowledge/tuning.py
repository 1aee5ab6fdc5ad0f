"""What the bi-encoder is fine-tuned on, and whether the tuned model is better than the shipped one (issue 26).

The shipped model (all-MiniLM-L6-v2) never saw this tenant's words. Its own knowledge says how customers ask for each
entry: an FAQ's question and alternates are asked for its answer, an article's title and headings for its sections.
Those pairs, each with a near miss of the shipped model (the passage of *another* entry it ranks highest) as a hard
negative, and an FAQ's questions again with each of its near misses by words (``siblings``: the FAQs asked in much the
same words, "solid amber light" and "flashing amber light", which the shipped model often ranks alike and so never
mines), are what ``vigil.knowledge.training`` teaches it with MultipleNegativesRankingLoss; the analysts' verdicts
add the questions customers really asked: an accepted (or edited) answer pairs the question with its entry, a
dismissed one makes that entry a hard negative of the question.

Part of it is held back and never trained on: one alternate of each FAQ that has two or more, about a quarter of the
articles' headings, a fifth of the accepted verdicts. Each model is judged on those questions twice: by itself (it
ranks every served entry by its best passage, ``score``), and as served (the knowledge store's whole search, BM25,
the FAQs' questions and the re-ranking included, over the knowledge without the held-back alternates,
``rank_score``). The tuned model replaces the shipped one only if it does better as served, by a margin (``decide``):
on the bundled help centre a model 10 points better at hit@1 by itself was no better as served.

Everything here is plain data and numpy: the training itself, with torch, is ``training.py``'s, in a child process.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from vigil.knowledge.documents import Entry
from vigil.knowledge.embedding import Vectors
from vigil.knowledge.ranking import overlap, polarities

RELATIVE_MARGIN = 0.05
"""A negative must be at most 95% as similar to the question as its positive (the shipped model's cosine): a passage
nearer than that is as likely another right answer (an FAQ and an article on one topic) as a near miss, and teaching
it away would hurt (sentence-transformers' ``mine_hard_negatives`` uses the same guard)."""
SIBLING = 0.25
"""How alike two FAQs' questions must be in words (the cosine of their stemmed content words, as the near-miss stage
compares candidates: ``ranking.overlap``) to be near misses of each other."""
SIBLINGS = 2
"""The most near misses by words an FAQ is taught against (its nearest)."""
MIN_PROBES = 10
"""Fewer held-back questions than this judge nothing: the gate keeps the shipped model."""
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True, slots=True)
class Verdict:
    """An analyst's verdict on an answer: the customer's question, the entry the answer was drawn from, and whether
    it was accepted (or edited and sent) or dismissed."""

    question: str
    entry_id: str
    accepted: bool


@dataclass(frozen=True, slots=True)
class Pair:
    """A question and the entry that answers it; ``passage_id`` when a passage of it is known to be the answer (else
    the entry's passage nearest to the question is); ``avoid``, entries an analyst said do not answer it; ``target``,
    a text of the entry to pull the question towards instead of a passage (an FAQ's own question, for an
    alternate: the store matches questions with questions too)."""

    question: str
    entry_id: str
    passage_id: str | None = None
    avoid: tuple[str, ...] = ()
    target: str | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """The pairs to train on, and the held-back ones the gate judges by."""

    train: list[Pair]
    held_back: list[Pair]
    counts: dict[str, int] = field(default_factory=dict)
    """How many of each source: faq_questions, article_anchors, verdicts_accepted, verdicts_dismissed, held_back."""


@dataclass(frozen=True, slots=True)
class Example:
    """One training row: the question, its positive passage's text, and a hard negative's (another entry's)."""

    anchor: str
    positive: str
    negative: str
    entry_id: str


@dataclass(frozen=True, slots=True)
class Score:
    """How well a model finds the right entry for the held-back questions, over every served entry's passages."""

    hit_at_1: float
    mrr: float
    probes: int


@dataclass(frozen=True, slots=True)
class Decision:
    """The gate's verdict: keep the tuned model or not, and why."""

    accepted: bool
    reason: str


def _hashed(*parts: str) -> int:
    return hashlib.sha256("\x1f".join(parts).encode()).digest()[0]


def plan(entries: Sequence[Entry], verdicts: Sequence[Verdict] = ()) -> Plan:
    """The training and held-back pairs from the served ``entries`` and the analysts' ``verdicts`` (deterministic:
    the same knowledge holds back the same questions, so two runs are judged alike)."""
    known = {e.id: e for e in entries if e.passages}
    train: list[Pair] = []
    held: list[Pair] = []
    counts: dict[str, int] = defaultdict(int)
    for entry in known.values():
        for pair, probe in _entry_pairs(entry):
            (held if probe else train).append(pair)
            kind = "article_anchors" if not entry.questions else "faq_questions" if pair.target is None else "faq_pairs"
            counts[kind] += 1
    for pair, probe in _verdict_pairs(verdicts, known):
        (held if probe else train).append(pair)
        counts["verdicts_accepted"] += 1
    counts["verdicts_dismissed"] = sum(1 for v in verdicts if not v.accepted and v.entry_id in known)
    trained = {p.question.casefold() for p in train}
    held = [p for p in _unique(held) if p.question.casefold() not in trained]
    train = [p for p in train if p.target is None or p.target.casefold() != p.question.casefold()]
    counts["held_back"] = len(held)
    counts["train"] = len(train)
    return Plan(train=train, held_back=held, counts=dict(counts))


def _entry_pairs(entry: Entry) -> Iterable[tuple[Pair, bool]]:
    """An entry's questions, each marked whether it is held back."""
    first = entry.passages[0].id
    if entry.questions:
        held = 1 + _hashed(entry.id) % (len(entry.questions) - 1) if len(entry.questions) >= 3 else -1
        for n, question in enumerate(entry.questions):
            yield Pair(question, entry.id, first), n == held
            if n > 0 and n != held:
                yield Pair(question, entry.id, first, target=entry.questions[0]), False
        return
    yield Pair(entry.title, entry.id, first), False
    for passage in entry.passages:
        if passage.heading:
            yield Pair(passage.heading, entry.id, passage.id), _hashed(entry.id, passage.heading) % 4 == 0
        opening = _first_sentence(passage.text)
        if opening is not None:
            yield Pair(opening, entry.id, passage.id), False


def _first_sentence(text: str) -> str | None:
    """The first sentence of a passage's own text (after its title line), when it is question-sized."""
    body = text.split("\n", 1)[1] if "\n" in text else text
    sentence = _SENTENCE.split(body.strip(), maxsplit=1)[0].strip()
    return sentence if 20 <= len(sentence) <= 200 else None


def _verdict_pairs(verdicts: Sequence[Verdict], known: Mapping[str, Entry]) -> Iterable[tuple[Pair, bool]]:
    """A pair per question an analyst accepted an answer to, avoiding the entries dismissed for that question."""
    dismissed: dict[str, set[str]] = defaultdict(set)
    for verdict in verdicts:
        if not verdict.accepted:
            dismissed[verdict.question.casefold()].add(verdict.entry_id)
    seen: set[tuple[str, str]] = set()
    for verdict in verdicts:
        key = (verdict.question.casefold(), verdict.entry_id)
        if not verdict.accepted or verdict.entry_id not in known or key in seen or not verdict.question.strip():
            continue
        seen.add(key)
        avoid = tuple(sorted(dismissed[key[0]] - {verdict.entry_id}))
        yield Pair(verdict.question, verdict.entry_id, None, avoid), _hashed(verdict.question) % 5 == 0


def _unique(pairs: Iterable[Pair]) -> list[Pair]:
    seen: set[str] = set()
    out: list[Pair] = []
    for pair in pairs:
        if pair.question.casefold() not in seen:
            seen.add(pair.question.casefold())
            out.append(pair)
    return out


@dataclass(frozen=True, slots=True)
class Corpus:
    """Every served passage: its id, its entry and its text, in one order (the rows of the passage vectors)."""

    ids: list[str]
    entries: list[str]
    texts: list[str]

    @classmethod
    def of(cls, entries: Sequence[Entry]) -> Corpus:
        passages = [(p.id, e.id, p.text) for e in entries for p in e.passages]
        return cls([p[0] for p in passages], [p[1] for p in passages], [p[2] for p in passages])


def siblings(entries: Sequence[Entry]) -> dict[str, tuple[str, ...]]:
    """Each FAQ's near misses by words: the other FAQs whose questions (all of them, alternates included) say the
    same content words, at a cosine of ``SIBLING`` or more, the ``SIBLINGS`` nearest. These are the pairs a customer's
    one word tells apart (keep or leave the number, a first bill or a higher one), found by what the help centre
    says rather than by the shipped model's similarity, which is what fails on them."""
    faqs = [(e.id, polarities(" ".join(e.questions))) for e in entries if e.questions and e.passages]
    found: dict[str, tuple[str, ...]] = {}
    for entry_id, words in faqs:
        near = sorted(
            ((overlap(words, other), other_id) for other_id, other in faqs if other_id != entry_id),
            reverse=True,
        )
        chosen = tuple(other_id for similarity, other_id in near[:SIBLINGS] if similarity >= SIBLING)
        if chosen:
            found[entry_id] = chosen
    return found


def examples(
    pairs: Sequence[Pair],
    questions: Vectors,
    corpus: Corpus,
    passages: Vectors,
    near: Mapping[str, Sequence[str]] | None = None,
) -> list[Example]:
    """Each pair as a training row with its hard negative, mined with the shipped model's vectors of the questions
    (one row per pair) and of the corpus's passages: the passage of another entry it ranks highest, below
    ``RELATIVE_MARGIN`` of the positive; a passage of an entry an analyst dismissed for the question first. A pair
    whose entry has near misses by words (``near``, from ``siblings``) gets a row more for each, its first passage
    (an FAQ's answer) the negative, whatever the shipped model says of it. A pair without a passage of its entry, or
    without any other entry, is left out."""
    by_entry: dict[str, list[int]] = defaultdict(list)
    for row, entry_id in enumerate(corpus.entries):
        by_entry[entry_id].append(row)
    similarities = questions @ passages.T
    out: list[Example] = []
    for n, pair in enumerate(pairs):
        own = by_entry.get(pair.entry_id, [])
        if not own:
            continue
        sims = similarities[n]
        positive = own[int(np.argmax(sims[own]))] if pair.passage_id is None else corpus.ids.index(pair.passage_id)
        negative = _negative(sims, positive, pair, corpus, by_entry)
        text = pair.target if pair.target is not None else corpus.texts[positive]
        if negative is not None:
            out.append(Example(pair.question, text, corpus.texts[negative], pair.entry_id))
        for sibling in (near or {}).get(pair.entry_id, ()):
            rows = by_entry.get(sibling, [])
            if rows and rows[0] != negative:
                out.append(Example(pair.question, text, corpus.texts[rows[0]], pair.entry_id))
    return out


def _negative(
    sims: np.ndarray, positive: int, pair: Pair, corpus: Corpus, by_entry: Mapping[str, list[int]]
) -> int | None:
    dismissed = [row for entry_id in pair.avoid for row in by_entry.get(entry_id, [])]
    if dismissed:
        return max(dismissed, key=lambda row: float(sims[row]))
    ceiling = float(sims[positive]) * (1 - RELATIVE_MARGIN)
    for row in np.argsort(-sims):
        if corpus.entries[row] != pair.entry_id and float(sims[row]) < ceiling:
            return int(row)
    return None


def without_held_back(entries: Sequence[Entry], held_back: Sequence[Pair]) -> list[Entry]:
    """The entries as the search that judges is to see them: an FAQ without its held-back alternate (which it would
    otherwise find word for word)."""
    held = {(p.entry_id, p.question) for p in held_back}
    return [replace(e, questions=tuple(q for q in e.questions if (e.id, q) not in held)) for e in entries]


def rank_score(probes: Sequence[Pair], rankings: Sequence[Sequence[str]]) -> Score:
    """Hit@1 and mean reciprocal rank of each probe's entry in its ranking (entry ids, best first; an entry not in
    it counts 0)."""
    if not probes:
        return Score(0.0, 0.0, 0)
    hits = sum(1 for p, ranked in zip(probes, rankings, strict=True) if ranked[:1] == [p.entry_id])
    reciprocal = sum(
        1.0 / (1 + list(ranked).index(p.entry_id))
        for p, ranked in zip(probes, rankings, strict=True)
        if p.entry_id in ranked
    )
    return Score(hits / len(probes), reciprocal / len(probes), len(probes))


def score(probes: Sequence[Pair], questions: Vectors, corpus: Corpus, passages: Vectors) -> Score:
    """Hit@1 and mean reciprocal rank of each probe's entry, an entry ranked by its best passage (cosine)."""
    if not probes:
        return Score(0.0, 0.0, 0)
    by_entry: dict[str, list[int]] = defaultdict(list)
    for row, entry_id in enumerate(corpus.entries):
        by_entry[entry_id].append(row)
    column = {name: i for i, name in enumerate(by_entry)}
    similarities = questions @ passages.T
    best = np.stack([similarities[:, rows].max(axis=1) for rows in by_entry.values()], axis=1)  # per probe, entry
    hits = 0
    reciprocal = 0.0
    for n, probe in enumerate(probes):
        if probe.entry_id not in column:
            continue
        right = best[n, column[probe.entry_id]]
        rank = 1 + int(np.sum(best[n] > right))
        hits += rank == 1
        reciprocal += 1.0 / rank
    return Score(hits / len(probes), reciprocal / len(probes), len(probes))


def decide(shipped: Score, tuned: Score, *, margin: float) -> Decision:
    """Keep the tuned model only if, on the held-back questions as served, its MRR beats the shipped model's by
    ``margin`` and its hit@1 is no worse (a better average bought with fewer right first answers is not better for an
    analyst, who reads the first)."""
    if tuned.probes < MIN_PROBES:
        return Decision(False, f"only {tuned.probes} held-back questions (fewer than {MIN_PROBES}): too few to judge")
    if tuned.hit_at_1 < shipped.hit_at_1:
        return Decision(False, f"hit@1 fell from {shipped.hit_at_1:.3f} to {tuned.hit_at_1:.3f}")
    if tuned.mrr < shipped.mrr + margin:
        return Decision(False, f"MRR {tuned.mrr:.3f} is not {margin:.3f} above the shipped model's {shipped.mrr:.3f}")
    return Decision(
        True, f"MRR {shipped.mrr:.3f} -> {tuned.mrr:.3f}, hit@1 {shipped.hit_at_1:.3f} -> {tuned.hit_at_1:.3f}"
    )
