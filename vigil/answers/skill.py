"""The answer skill: the customer asked something; suggest the answer, with its sources.

FAQ first: when the question is a paraphrase of an FAQ (its question or one of its alternates), the FAQ's answer
goes out at once. Otherwise retrieval over articles, documents and mined case knowledge, and an extractive
answer: the best passage, trimmed to the sentences that answer the question. Confidence is a calibrated
probability (``calibration.py``), not a raw similarity.
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
from vigil.knowledge.store import FaqMatch, Hit, KnowledgeStore
from vigil.wire.events import Event, Message, SourceRef, SuggestionKind

# Fitted by `python -m bench.calibrate` on held-out FAQ paraphrases and real off-topic questions (FAQ) and on the
# tau2 banking dev tasks (retrieval); see docs/evaluation.md. Features: see faq_features / retrieval_features.
FAQ_MODEL = Logistic(weights=(12.925, 10.080), bias=-8.562)
RETRIEVAL_MODEL = Logistic(weights=(7.006, 0.327, -1.887), bias=-5.328)
SOURCES = 3

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(*])|\n+")
_WORD = re.compile(r"[a-z0-9]+")
_YES_OR_NO = re.compile(r"^(?:yes|no)[.,!]\s+(?=\S)", re.IGNORECASE)
_STOP = frozenset(
    "a an the and or but if of to in on at by for with from is are was were be been do does did i you we my your "
    "our it this that can could would will how what when where why which who me us please hi hello there".split()
)


def faq_features(match: FaqMatch) -> tuple[float, float]:
    """Similarity of the nearest FAQ question, and its margin over the next FAQ."""
    return (match.similarity, match.margin)


def retrieval_features(hits: Sequence[Hit]) -> tuple[float, float, float]:
    """Dense similarity and lexical score of the best hit, and its dense lead over the second."""
    top = hits[0]
    second = hits[1].dense if len(hits) > 1 else 0.0
    return (top.dense, math.log1p(top.lexical), top.dense - second)


class AnswerSkill:
    """Suggests answers to customers' questions from the knowledge store."""

    name = "answers"
    kind: SuggestionKind = "answer"

    def __init__(
        self,
        knowledge: KnowledgeStore,
        settings: AnswerSettings,
        *,
        faq_model: Logistic = FAQ_MODEL,
        retrieval_model: Logistic = RETRIEVAL_MODEL,
        drafter: Drafter | None = None,
    ) -> None:
        self._knowledge = knowledge
        self._drafter = drafter
        self._settings = settings
        self._faq_model = faq_model
        self._retrieval_model = retrieval_model

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        if not isinstance(event, Message):
            return ()
        question = event.text
        # The conversation's tenant sees the global knowledge and its own, never another tenant's.
        tenant = case.tenant if case is not None else event.tenant
        vector = await self._knowledge.embed(question)
        faq = await self._knowledge.match_faq(question, vector=vector, tenant=tenant)
        if faq is not None:
            confidence = self._faq_model.probability(faq_features(faq))
            if confidence >= self._settings.faq_confidence:
                source = SourceRef(kind="faq", id=faq.entry_id, title=faq.question, score=round(faq.similarity, 4))
                return (
                    Proposal(
                        kind="answer",
                        text=fit_to_question(question, faq.answer),
                        confidence=round(confidence, 4),
                        sources=(source,),
                        why=f"matches the FAQ “{faq.question}”",
                    ),
                )
        hits = await self._knowledge.search(question, SOURCES, vector=vector, tenant=tenant)
        if not hits:
            return ()
        confidence = self._retrieval_model.probability(retrieval_features(hits))
        top = hits[0]
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
