"""The intervention policy: when vigil speaks up with an answer, and when it keeps quiet.

An analyst's attention is the scarce thing. vigil answers only a customer message that asks something, on a case
that is not closed, and not a question it has already answered in the conversation (the customer asking again, in
much the same words); it cites a source it already cited in the conversation only for what the customer had not
asked and vigil had not said (``followups.py``), and never says something too close to what it already said; and
it drops a suggestion that would arrive after the analyst answered or the customer wrote again, or that is about a
message too old to matter. Each silence has its reason.

There is no quiet time after an answer: a follow-up with an answer of its own is answered however soon it comes
(issue 11: one that matched an FAQ at 0.998 was silenced because an answer had gone out 7 s earlier). A burst of
messages needs none either: an answer to a message the customer has already written after is ``superseded``.
"""

from __future__ import annotations

import re
from collections import OrderedDict

from vigil.answers import followups
from vigil.answers.needs import ImplicitRequestDetector
from vigil.answers.settings import AnswerSettings
from vigil.cases.questions import classify
from vigil.cases.store import CaseStore, Earlier
from vigil.core.clock import Clock
from vigil.flow.case import CaseState
from vigil.flow.gates import Decision
from vigil.flow.skills import Proposal
from vigil.wire.events import Event, Message, SuggestionKind

_WORDS = re.compile(r"\w+")
# Words that carry no subject: a question's other words say what it is about (a re-ask often adds "again", "sorry",
# "so", "still", "just checking").
_FILLER = frozenset(
    "a an the and or but if of to in on at by for with from is are was were be been being do does did i you we my "
    "your our it its this that these those can could would will should shall may might must how what when where "
    "why which who whom me us please hi hello hey there so ok okay sorry again still just right yes no not then "
    "thanks thank really actually sure any some also too am im get got say said tell told know checking check".split()
)
_REMEMBERED_EVENTS = 1024  # events in flight at once are at most VIGIL_INGEST__MAX_IN_FLIGHT (512)


def similarity(a: str, b: str) -> float:
    """Word-set overlap (Jaccard) of two texts, from 0 (nothing shared) to 1 (the same words)."""
    left, right = set(_WORDS.findall(a.lower())), set(_WORDS.findall(b.lower()))
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


class InterventionPolicy:
    """The gate for answers (and the confidence floor for every other kind)."""

    def __init__(
        self,
        *,
        store: CaseStore,
        clock: Clock,
        settings: AnswerSettings,
        implicit: ImplicitRequestDetector | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._settings = settings
        self._implicit = implicit
        # What admit read, for review to reuse: one read of the conversation's suggestions per event. An event id
        # is unique only within its conversation and type, so the key holds all three.
        self._earlier: OrderedDict[tuple[str, str, str], list[Earlier]] = OrderedDict()

    async def admit(self, kind: SuggestionKind, event: Event, case: CaseState | None) -> Decision:
        if kind != "answer":
            return Decision.allow()
        if not isinstance(event, Message) or event.role != "customer":
            return Decision.silence("not_a_customer_message")
        if case is not None and case.status == "closed":
            return Decision.silence("case_closed")
        if not await self._asks(event.text):
            return Decision.silence("not_a_question")
        earlier = await self._recent(event)
        if any(_asks_again(event.text, e, self._settings.max_question_overlap) for e in earlier):
            return Decision.silence("repeated_question")
        return Decision.allow()

    async def _asks(self, text: str) -> bool:
        """The rules first; a message they reject may still state a need the implicit-request model hears."""
        verdict = classify(text)
        if verdict.asks:
            return True
        if self._implicit is None or verdict.reason == "empty":
            return False
        return await self._implicit.heard(text)

    async def review(self, proposal: Proposal, event: Event | None, case: CaseState | None) -> Decision:
        floor = self._settings.min_confidence
        if proposal.confidence < floor:
            return Decision.silence("low_confidence")
        if proposal.kind != "answer" or event is None:
            return Decision.allow()
        earlier = await self._recent(event)
        question = event.text if isinstance(event, Message) else ""
        return _fresh(proposal, question, earlier, self._settings.max_similarity)

    async def earlier(self, event: Event) -> list[Earlier]:
        """What was said in ``event``'s conversation before it, with the questions it answered: the same read the
        gate makes for the event (the answer skill looks at it to answer a follow-up from what was not said)."""
        return await self._recent(event)

    async def _recent(self, event: Event) -> list[Earlier]:
        """The conversation's latest suggestions before ``event``, with their questions (read once per event)."""
        key = (event.conversation_id, event.type, event.id)
        if key in self._earlier:
            return self._earlier[key]
        earlier = await self._store.earlier_suggestions(event.conversation_id)
        self._earlier[key] = earlier
        if len(self._earlier) > _REMEMBERED_EVENTS:
            self._earlier.popitem(last=False)
        return earlier

    def timely(self, event: Event, *, superseded: bool) -> Decision:
        if superseded:
            return Decision.silence("superseded")
        age = (self._clock.now() - event.occurred_at).total_seconds()
        if age > self._settings.max_age_s:
            return Decision.silence("stale")
        return Decision.allow()


def subject(text: str) -> set[str]:
    """The words of ``text`` that say what it is about (lower case, without filler)."""
    return {w for w in _WORDS.findall(text.lower()) if w not in _FILLER}


def _asks_again(question: str, earlier: Earlier, max_overlap: float) -> bool:
    """Whether ``question`` asks again what ``earlier`` answered: at least ``max_overlap`` of its subject words
    are the earlier question's (so it adds next to nothing new). A message with no subject words of its own
    ("and?", "how?") is a follow-up about the last answer, not a repeat."""
    if earlier.suggestion.kind != "answer" or earlier.asked is None:
        return False
    words = subject(question)
    if not words:
        return False
    return len(words & subject(earlier.asked)) / len(words) >= max_overlap


def _fresh(proposal: Proposal, question: str, earlier: list[Earlier], max_similarity: float) -> Decision:
    """Refuse an answer drawn from a source already used in the conversation (its first source is the one it
    was drawn from) unless it speaks to something the question asks that was neither asked nor said before and is
    not mostly what that source already said; and refuse a text too close to an earlier suggestion."""
    if proposal.sources:
        source = (proposal.sources[0].kind, proposal.sources[0].id)
        if source in followups.cited(earlier) and (
            not followups.speaks_to(proposal.text, followups.new_words(question, earlier))
            or followups.said_share(proposal.text, followups.said_from(source, earlier)) >= max_similarity
        ):
            return Decision.silence("repeated_source")
    if any(similarity(proposal.text, e.suggestion.text) >= max_similarity for e in earlier):
        return Decision.silence("similar_to_earlier")
    return Decision.allow()
