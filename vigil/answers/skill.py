"""The answer skill: the customer asked something; suggest the answer, with its sources.

One ranking: the skill answers from the knowledge store's first hit, exactly what `vigil kb search` lists first
(``vigil/knowledge/ranking.py``). When that is an FAQ and the skill is confident, the FAQ's answer goes out whole;
otherwise an extractive answer: the best passage, trimmed to the sentences that answer the question. Confidence is
a calibrated probability (``calibration.py``), not a raw similarity, and it weighs whether the words that tell the
first candidates apart side with the answer: a near miss the words contradict is not stated with confidence. Nor is
an entry the tenant's analysts dismissed for questions like this one (``judged``): search has already ranked it
lower for that (``vigil/knowledge/verdicts.py``), and where it is first all the same, it is stated less surely.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from vigil.answers.calibration import Logistic
from vigil.answers.drafting import Drafter, DraftSource, drafted_why
from vigil.answers.questions import asks_yes_or_no
from vigil.answers.settings import AnswerSettings
from vigil.flow.case import CaseState
from vigil.flow.skills import Proposal
from vigil.knowledge import ranking
from vigil.knowledge.settings import RankingName
from vigil.knowledge.store import Hit, KnowledgeStore
from vigil.wire.events import Event, Message, SourceRef, SuggestionKind

# Fitted by `python -m bench.calibrate` (with VIGIL_KNOWLEDGE__RANKING set to each ranking) on the tune half of the
# team's Brightwave phrasings, held-out FAQ alternates, real off-topic questions and the tau2 banking dev tasks; see
# docs/evaluation.md. Features: see features(). One model for FAQs and articles (whether the first hit is an FAQ is
# one of its features), per ranking: what a ranking puts first, and so how often it is right, differs.
MODELS: dict[RankingName, Logistic] = {
    "hybrid": Logistic(weights=(7.903, -2.109, -0.099, 2.251, 1.678, 1.740, -0.088), bias=-3.669),
    "cross_validated": Logistic(weights=(7.569, -2.121, 0.158, 1.927, 1.104, 1.684, -0.029), bias=-3.863),
    "adaptive": Logistic(weights=(7.903, -2.109, -0.099, 2.251, 1.678, 1.740, -0.088), bias=-3.669),
}
MODEL = MODELS["hybrid"]
SOURCES = 3
VERDICT_LOGIT = 4.0
"""How far the analysts' verdict on the first hit's entry (``Hit.verdict``, -1..1) moves the stated confidence, in
log-odds: one dismissal of it on the same question (-0.5) takes 0.977 to 0.85, two (-0.67) to 0.74. Set, not fitted:
the labelled phrasings have no verdicts yet. When ``bench.calibrate`` has some, ``Hit.verdict`` becomes a feature of
``MODELS`` and this term goes."""

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(*])|\n+")
_WORD = re.compile(r"[a-z0-9]+")
_YES_OR_NO = re.compile(r"^(?:yes|no)[.,!]\s+(?=\S)", re.IGNORECASE)
_STOP = frozenset(
    "a an the and or but if of to in on at by for with from is are was were be been do does did i you we my your "
    "our it this that can could would will how what when where why which who me us please hi hello there".split()
)


def features(hits: Sequence[Hit]) -> tuple[float, float, float, float, float, float, float]:
    """What the confidence model reads from a ranking: the first hit's similarity (an FAQ's nearest question, or
    its passage if nearer; an article's passage), its lead over the second hit's, log(1 + its BM25 score), its
    agreement with the words that tell the first candidates apart, its agreement's lead over the second's, whether
    it is an FAQ asked nearly word for word (its nearest question at ``ranking.QUESTION_FIRST`` or more), and
    whether it is an FAQ at all."""
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
    )


def judged(confidence: float, verdict: float) -> float:
    """``confidence`` moved by ``VERDICT_LOGIT`` times ``verdict`` in log-odds: lower for an entry the tenant's
    analysts dismissed on questions like this one, higher for one they accepted; unchanged with no verdict (0)."""
    if verdict == 0.0:
        return confidence
    p = min(max(confidence, 1e-9), 1.0 - 1e-9)
    return 1.0 / (1.0 + math.exp(-(math.log(p / (1.0 - p)) + VERDICT_LOGIT * verdict)))


def _similarity(hit: Hit) -> float:
    return max(hit.dense, hit.question)


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
    ) -> None:
        self._knowledge = knowledge
        self._drafter = drafter
        self._settings = settings
        self._model = model if model is not None else MODELS[knowledge.ranking]

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        if not isinstance(event, Message):
            return ()
        question = event.text
        # The conversation's tenant sees the global knowledge and its own, never another tenant's.
        tenant = case.tenant if case is not None else event.tenant
        hits = await self._knowledge.search(question, SOURCES, tenant=tenant)
        if not hits:
            return ()
        top = hits[0]
        confidence = judged(self._model.probability(features(hits)), top.verdict)
        if top.kind == "faq" and confidence >= self._settings.faq_confidence:
            source = SourceRef(kind="faq", id=top.entry_id, title=top.title, score=round(top.score, 4))
            answer = top.passage.split("\n", 1)[-1]  # an FAQ's one passage is its question, then its answer
            return (
                Proposal(
                    kind="answer",
                    text=fit_to_question(question, answer),
                    confidence=round(confidence, 4),
                    sources=(source,),
                    why=f"matches the FAQ “{top.title}”",
                ),
            )
        sources = tuple(SourceRef(kind=h.kind, id=h.entry_id, title=h.title, score=round(h.score, 4)) for h in hits)
        text = fit_to_question(question, extract(question, top.passage, self._settings.max_chars))
        # The card's one number is the calibrated confidence: a raw similarity beside it reads as a second one.
        why = f"from “{top.title}”"
        if self._drafter is not None and self._drafter.enabled and confidence >= self._settings.min_confidence:
            # Only answers the gate would let through are worth a model call; on any failure the extract stands.
            draft = await self._drafter.draft(question, [DraftSource(h.entry_id, h.title, h.passage) for h in hits])
            if draft is not None:
                text, why = draft.text, drafted_why(draft)
        return (Proposal(kind="answer", text=text, confidence=round(confidence, 4), sources=sources, why=why),)


def extract(question: str, passage: str, max_chars: int) -> str:
    """The run of consecutive sentences of ``passage`` that best answers ``question``, within ``max_chars``."""
    body = passage.split("\n", 1)[1] if "\n" in passage else passage  # drop the "Title: heading" line
    sentences = [s.strip() for s in _SENTENCE.split(body) if s.strip()]
    if not sentences:
        return passage[:max_chars]
    wanted = _content_words(question)
    scores = [len(wanted & _content_words(s)) for s in sentences]
    best: tuple[float, int, int] = (-1.0, 0, 1)
    for start in range(len(sentences)):
        length, total, end = 0, 0.0, start
        while end < len(sentences) and length + len(sentences[end]) <= max_chars:
            length += len(sentences[end]) + 1
            total += scores[end] * (0.85 ** (end - start))
            end += 1
        if end > start and total > best[0]:
            best = (total, start, end)
    _, start, end = best
    text = " ".join(sentences[start:end])
    return text if text else sentences[0][:max_chars]


def fit_to_question(question: str, answer: str) -> str:
    """``answer`` without its opening "Yes." or "No," when ``question`` is not a yes/no question: an FAQ written
    for "Can I keep my number?" also answers "How do I keep my number?", where a "Yes." reads as a non sequitur."""
    if asks_yes_or_no(question):
        return answer
    rest = _YES_OR_NO.sub("", answer, count=1)
    return rest[0].upper() + rest[1:] if rest != answer else answer


def _content_words(text: str) -> set[str]:
    return {w[:6] for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1}
