"""The answer skill: the customer asked something; suggest the answer, with its sources.

One ranking: the skill answers from the knowledge store's first hit, exactly what `vigil kb search` lists first
(``vigil/knowledge/ranking.py``). When that is an FAQ, its answer goes out whole if the skill is confident or the
answer is short; otherwise the sentences of the entry that answer the question (``snippets.py``). In a
conversation, a follow-up whose first hit was cited already is answered from what that source has not said or from
the next source not cited (``followups.py``). Confidence is
a calibrated probability (``calibration.py``), not a raw similarity, and it weighs whether the words that tell the
first candidates apart side with the answer: a near miss the words contradict is not stated with confidence. Nor is
an entry the tenant's analysts dismissed for questions like this one (``judged``): search has already ranked it
lower for that (``vigil/knowledge/verdicts.py``), and where it is first all the same, it is stated less surely.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from vigil.answers import followups, snippets
from vigil.answers.calibration import Logistic
from vigil.answers.drafting import Drafter, DraftSource, drafted_why
from vigil.answers.settings import AnswerSettings
from vigil.cases.questions import asks_yes_or_no
from vigil.cases.store import Earlier
from vigil.flow.case import CaseState
from vigil.flow.skills import Proposal
from vigil.knowledge import ranking
from vigil.knowledge.settings import RankingName
from vigil.knowledge.store import Hit, KnowledgeStore
from vigil.wire.events import Event, Message, SourceRef, SuggestionKind

# Fitted by `python -m bench.calibrate` (with VIGIL_KNOWLEDGE__RANKING set to each ranking) on the tune halves of
# the team's phrasings of two help centres, held-out FAQ alternates, real off-topic questions and the tau2 banking dev
# tasks; see docs/evaluation.md. Features: see features(). One model for FAQs and articles (whether the first hit is
# an FAQ is one of its features), per ranking: what a ranking puts first, and so how often it is right, differs.
MODELS: dict[RankingName, Logistic] = {
    "hybrid": Logistic(
        weights=(7.343, -1.308, -0.344, 2.897, 2.236, 0.050, -0.478, 0.522, 0.880, 0.130, 0.794), bias=-3.610
    ),
    "cross_validated": Logistic(
        weights=(7.699, -1.954, -0.008, 2.677, 1.458, -0.087, -0.642, 0.281, 0.778, 0.724, 0.168), bias=-3.801
    ),
    "adaptive": Logistic(
        weights=(7.207, -1.763, -0.135, 2.835, 2.795, 0.002, -0.432, 0.612, 0.628, 0.095, 1.013), bias=-3.782
    ),
}
MODEL = MODELS["adaptive"]
SOURCES = 3
VERDICT_LOGIT = 4.0
"""How far the analysts' verdict on the first hit's entry (``Hit.verdict``, -1..1) moves the stated confidence, in
log-odds: one dismissal of it on the same question (-0.5) takes 0.977 to 0.85, two (-0.67) to 0.74. Set, not fitted:
the labelled phrasings have no verdicts yet. When ``bench.calibrate`` has some, ``Hit.verdict`` becomes a feature of
``MODELS`` and this term goes."""
ALTERNATIVES = 2
"""Hits looked at beyond the cited ones, for a follow-up whose first hits were cited already in the conversation."""

_YES_OR_NO = re.compile(r"^(?:yes|no)[.,!]\s+(?=\S)", re.IGNORECASE)


def features(question: str, hits: Sequence[Hit]) -> tuple[float, ...]:
    """What the confidence model reads from a ranking: the first hit's similarity (an FAQ's nearest question, or
    its passage if nearer; an article's passage), its lead over the second hit's, log(1 + its BM25 score), its
    agreement with the words that tell the first candidates apart, its agreement's lead over the second's, whether
    it is an FAQ asked nearly word for word (its nearest question at ``ranking.QUESTION_FIRST`` or more), whether
    it is an FAQ at all, and whether the rankings agree on it: first by its passages' similarity alone, first by
    BM25 alone, and (an FAQ) the FAQ whose question is nearest among the hits; and how much of its title the
    question says (an FAQ's title is its question: "why is my first bill higher" asks something "my bill is higher
    than usual" does not)."""
    top = hits[0]
    second = hits[1] if len(hits) > 1 else None
    similarity = _similarity(top)
    return (
        similarity,
        similarity - (_similarity(second) if second is not None else 0.0),
        math.log1p(top.lexical),
        top.agreement,
        top.agreement - (second.agreement if second is not None else 0.0),
        float(top.kind == "faq" and top.question >= ranking.QUESTION_FIRST),
        float(top.kind == "faq"),
        float(top.dense_rank == 0),
        float(top.lexical_rank == 0),
        float(top.kind == "faq" and top.question >= max(h.question for h in hits)),
        _said(top.title, question),
    )


def _said(text: str, question: str) -> float:
    """The share of ``text``'s content words (stemmed) that ``question`` says."""
    words = set(ranking.polarities(text))
    return len(words & set(ranking.polarities(question))) / len(words) if words else 0.0


def judged(confidence: float, verdict: float) -> float:
    """``confidence`` moved by ``VERDICT_LOGIT`` times ``verdict`` in log-odds: lower for an entry the tenant's
    analysts dismissed on questions like this one, higher for one they accepted; unchanged with no verdict (0)."""
    if verdict == 0.0:
        return confidence
    p = min(max(confidence, 1e-9), 1.0 - 1e-9)
    return 1.0 / (1.0 + math.exp(-(math.log(p / (1.0 - p)) + VERDICT_LOGIT * verdict)))


def _similarity(hit: Hit) -> float:
    return max(hit.dense, hit.question)


Conversation = Callable[[Event], Awaitable[Sequence[Earlier]]]
"""What was said in an event's conversation before it (``InterventionPolicy.earlier``: the gate's own read)."""


@dataclass(frozen=True, slots=True)
class _Said:
    """The conversation so far, as the skill needs it: its answers, the sources they cited and the question's new
    words (``followups.new_words``)."""

    earlier: Sequence[Earlier]
    cited: set[tuple[str, str]]
    new: set[str]

    def before(self, hit: Hit) -> list[str]:
        """What the conversation's answers drawn from ``hit``'s entry said."""
        return followups.said_from((hit.kind, hit.entry_id), self.earlier)

    def answers_anew(self, answer: _Answer, max_similarity: float) -> bool:
        """Whether ``answer`` answers what the question asks anew: it is about one of the question's new words (its
        FAQ's question, or its article's title or section heading, names it), says it, and is not mostly what its
        source already said. Being about the new word, not merely mentioning it, is what tells "and Turkey?" after
        an answer about Spain from a re-ask in other words, whose new words the next entries may happen to use."""
        proposal = answer.proposal
        source = (proposal.sources[0].kind, proposal.sources[0].id)
        said = followups.said_from(source, self.earlier)
        return (
            bool(self.new & snippets.words(answer.about))
            and followups.speaks_to(proposal.text, self.new)
            and followups.said_share(proposal.text, said) < max_similarity
        )


@dataclass(frozen=True, slots=True)
class _Answer:
    """A proposal, what the part of the entry it was drawn from is about (the passage's first line), and the hits
    it cites (the one it was drawn from first)."""

    proposal: Proposal
    about: str
    cited: Sequence[Hit]
    matched: bool = False
    """An FAQ matched with confidence, said as written (never redrafted)."""


class AnswerSkill:
    """Suggests answers to customers' questions from the knowledge store."""

    name = "answers"
    kind: SuggestionKind = "answer"

    def __init__(
        self,
        knowledge: KnowledgeStore,
        settings: AnswerSettings,
        *,
        model: Logistic | None = None,
        drafter: Drafter | None = None,
        conversation: Conversation | None = None,
    ) -> None:
        self._knowledge = knowledge
        self._drafter = drafter
        self._settings = settings
        self._model = model if model is not None else MODELS[knowledge.ranking]
        self._conversation = conversation

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        if not isinstance(event, Message):
            return ()
        question = event.text
        # The conversation's tenant sees the global knowledge and its own, never another tenant's.
        tenant = case.tenant if case is not None else event.tenant
        hits = await self._knowledge.search(question, SOURCES + ALTERNATIVES, tenant=tenant)
        if not hits:
            return ()
        said = await self._said(event, question)
        first = await self._answer(question, hits, 0)
        if said is None or (hits[0].kind, hits[0].entry_id) not in said.cited or not said.new:
            return (await self._drafted(question, first),)
        # The first source was cited already, and the question is not asked again in the same words (the gate saw
        # to that): what it asks anew may be in another part of that source, or in the next source not cited yet,
        # if that is good enough. Otherwise the first source's answer goes to the gate, which says why it is not said.
        for index, hit in enumerate(hits):
            if index and (hit.kind, hit.entry_id) in said.cited:
                continue
            answer = await self._answer(question, hits, index, said=said)
            good = answer.proposal.confidence >= self._settings.min_confidence
            if good and said.answers_anew(answer, self._settings.max_similarity):
                return (await self._drafted(question, answer),)
        return (first.proposal,)

    async def _said(self, event: Event, question: str) -> _Said | None:
        """The conversation's earlier answers, if it has any (and the skill was given a way to read them)."""
        if self._conversation is None:
            return None
        earlier = followups.answers(await self._conversation(event))
        if not earlier:
            return None
        return _Said(earlier, followups.cited(earlier), followups.new_words(question, earlier))

    async def _answer(self, question: str, hits: Sequence[Hit], index: int, *, said: _Said | None = None) -> _Answer:
        """The answer from ``hits[index]``; what its entry already said in the conversation is not said again.

        Its confidence: for the first hit, the calibrated probability that it is right. For a later one (the hits
        before it were cited already, and do not answer what the question asks anew), the probability that it is
        right as the first of the hits from it on, given that the ones before it are not: one entry answers a
        question, so that is its probability over the share the ruled-out hits leave, ``p / (1 - p_before)``, an
        approximation (the model was fitted on first hits; a later hit's own probability stands in for its share).

        An FAQ confidently matched goes out whole; below that confidence it still goes out whole when it is short
        enough (it was written to be read whole: a cut one loses half its answer); otherwise the sentences of the
        entry that answer the question (``snippets.py``)."""
        top, cited = hits[index], [*hits[index:], *hits[:index]][:SOURCES]
        confidence = self._model.probability(features(question, hits[index:]))
        if index:
            ruled_out = sum(self._model.probability(features(question, hits[i:])) for i in range(index))
            confidence = min(1.0, confidence / max(1.0 - ruled_out, confidence, 1e-9))
        confidence = judged(confidence, top.verdict)
        before = said.before(top) if said is not None else []
        text, about = "", top.passage.split("\n", 1)[0]
        if top.kind == "faq" and not before:
            answer = top.passage.split("\n", 1)[-1]  # an FAQ's one passage is its question, then its answer
            if confidence >= self._settings.faq_confidence:
                source = SourceRef(kind="faq", id=top.entry_id, title=top.title, score=round(top.score, 4))
                proposal = Proposal(
                    kind="answer",
                    text=fit_to_question(question, answer),
                    confidence=round(confidence, 4),
                    sources=(source,),
                    why=f"matches the FAQ “{top.title}”",
                )
                return _Answer(proposal, about, (top,), matched=True)
            if len(answer) <= self._settings.max_chars:
                text = answer
        if not text:
            snippet = self._snippet(question, top, before)
            text, about = snippet.text, snippet.about
        sources = tuple(SourceRef(kind=h.kind, id=h.entry_id, title=h.title, score=round(h.score, 4)) for h in cited)
        # The card's one number is the calibrated confidence: a raw similarity beside it reads as a second one.
        proposal = Proposal(
            kind="answer",
            text=fit_to_question(question, text),
            confidence=round(confidence, 4),
            sources=sources,
            why=f"from “{top.title}”",
        )
        return _Answer(proposal, about, cited)

    async def _drafted(self, question: str, answer: _Answer) -> Proposal:
        """``answer``'s proposal, written by the LLM from the hits it cites when drafting is on and the gate would
        let it through (only those are worth a model call); on any failure, or for an FAQ matched with confidence,
        the extract or the FAQ stands."""
        proposal = answer.proposal
        drafter = self._drafter
        if drafter is None or not drafter.enabled or answer.matched:
            return proposal
        if proposal.confidence < self._settings.min_confidence:
            return proposal
        draft = await drafter.draft(question, [DraftSource(h.entry_id, h.title, h.passage) for h in answer.cited])
        if draft is None:
            return proposal
        return replace(proposal, text=draft.text, why=drafted_why(draft))

    def _snippet(self, question: str, hit: Hit, said: Sequence[str]) -> snippets.Snippet:
        """The sentences of ``hit``'s entry that best answer ``question``, leaving out what was ``said``: from the
        passage the search found, or from another passage of an article that answers it better. The search finds
        the passage nearest to the question, which may be an introduction that repeats its words; the answer may
        be under a heading further down."""
        limit = self._settings.max_chars
        sections = self._knowledge.passages(hit.entry_id) if hit.kind != "faq" else []
        if len(sections) < 2:
            return snippets.extract(question, hit.passage, limit, title=hit.title, said=said)
        # Words every section states tell none of them apart: which section answers is told by the others.
        weights = snippets.word_weights(question, [text for _, text in sections])
        best = snippets.extract(question, hit.passage, limit, title=hit.title, said=said, weights=weights)
        for passage_id, text in sections:
            if passage_id != hit.passage_id:
                other = snippets.extract(question, text, limit, title=hit.title, said=said, weights=weights)
                if other.worth > best.worth:
                    best = other
        return best


def fit_to_question(question: str, answer: str) -> str:
    """``answer`` without its opening "Yes." or "No," when ``question`` is not a yes/no question: an FAQ written
    for "Can I keep my number?" also answers "How do I keep my number?", where a "Yes." reads as a non sequitur."""
    if asks_yes_or_no(question):
        return answer
    rest = _YES_OR_NO.sub("", answer, count=1)
    return rest[0].upper() + rest[1:] if rest != answer else answer
