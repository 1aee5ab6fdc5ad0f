"""Customer pressure: how often the customer chases and how their mood goes, and when to suggest an escalation.

``sentiment`` scores one customer message in [-1, 1]: VADER's compound score (a rule-based English sentiment
lexicon, good on "terrible", "unacceptable", "furious") plus a small support lexicon of its own for what VADER reads
as neutral in a support chat: threats ("cancel", "a manager", "complaint", "ombudsman"), exasperation ("fed up",
"unbelievable", "not happy", "useless") and a service that failed them ("never came", "took a day off", "wasted my
morning"), each -0.4. ``chasing`` says whether a message chases the analyst ("any
update?", "hello??", "still waiting", "it's been 3 days"). ``pressure`` reads the customer's messages since the
analyst's last reply and says escalate for two or more chasers, or for a strongly negative mood (-0.5 or below at
its lowest, or -0.75 for a single message) that is not recovering (the last message no better than the first).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer  # type: ignore[import-untyped]

__all__ = ["Pressure", "chasing", "pressure", "sentiment"]

STRONGLY_NEGATIVE = -0.5
"""A message this negative or worse, with the mood not recovering, is worth an escalation."""
ALONE_STRONGLY_NEGATIVE = -0.75
"""One message on its own must be this negative: one sad remark ("it says the code is no longer valid 🙁", -0.51)
is not yet a customer to escalate."""
CHASES_TO_ESCALATE = 2
"""Chasers since the analyst's last reply that call for an escalation."""
CUE_WEIGHT = 0.4

_CHASE = re.compile(
    r"\b(?:any (?:update|news|progress|word)|anything\s*\?|still (?:waiting|nothing|no\b)|hello\s*\?|anyone there"
    r"|is anyone|following up|checking in|it'?s (?:now )?been (?:over )?\w+ (?:hours?|days?|weeks?)"
    r"|been waiting|where (?:is|are) (?:my|the)|why is this taking|when is this (?:getting|going)|waiting\.\.\.)"
    r"|^\W*\?{2,}\W*$",
    re.IGNORECASE,
)
_CUES = re.compile(
    r"\b(?:cancel\w*|(?:a|the|your) manager|complain\w*|complaint|ombudsman|lawyer|unbelievable|useless|ridiculous"
    r"|disgrace\w*|fed up|not happy|worst|lose patience|losing patience|joke"
    r"|never (?:came|arrived|turned up|showed up|showed|called back|got back)|no[- ]show|let (?:me|us) down"
    r"|took (?:a|the) day off|wasted (?:a|my|the|our) (?:day|morning|afternoon)|(?:waited|waiting) (?:in )?all day)\b",
    re.IGNORECASE,
)
"""Support-chat words VADER scores as neutral or mild, each taking CUE_WEIGHT off the score."""


@dataclass(frozen=True, slots=True)
class Pressure:
    """How hard the customer is pressing, over their messages since the analyst's last reply.

    Attributes:
        chases: how many of them chase the analyst.
        sentiment: their mean sentiment in [-1, 1] (the handover brief's "customer's sentiment").
        trend: the last message's sentiment minus the first's (negative: getting worse; 0 for one message).
        escalate: whether to suggest an escalation.
        why: a short reason, for the suggestion ("" when ``escalate`` is False).
    """

    chases: int
    sentiment: float
    trend: float
    escalate: bool
    why: str


@cache
def _analyzer() -> SentimentIntensityAnalyzer:
    return SentimentIntensityAnalyzer()


_QUESTION = re.compile(r"[^.!?\n]*\?")
"""A question: "what's the charge if I cancel early?" asks about cancelling, it does not threaten it."""


SCORED_CHARS = 2000
"""How much of a message is scored: VADER's time grows faster than the text (about 1 s for a message of 59 KB, under
the 64 KB limit, and the same message is scored again with each chaser after it), while its compound score saturates
long before. A longer message is scored on its opening and its close, where a customer says how they feel."""


def sentiment(text: str) -> float:
    """One customer message's sentiment in [-1, 1]: VADER's compound score, and the support cues above outside
    questions (of its first and last ``SCORED_CHARS // 2`` characters when it is longer than ``SCORED_CHARS``)."""
    if len(text) > SCORED_CHARS:
        half = SCORED_CHARS // 2
        text = f"{text[:half]}\n{text[-half:]}"
    cues = len(_CUES.findall(_QUESTION.sub(" ", text)))
    score = float(_analyzer().polarity_scores(text)["compound"]) - CUE_WEIGHT * cues
    return max(-1.0, min(1.0, score))


def chasing(text: str) -> bool:
    """Whether a customer message chases the analyst ("any update?", "hello??", "still waiting")."""
    return bool(_CHASE.search(text.replace("\u2019", "'").strip()))


def pressure(customer_texts: Sequence[str]) -> Pressure:
    """The pressure of the customer's messages since the analyst's last reply, in order."""
    if not customer_texts:
        return Pressure(0, 0.0, 0.0, False, "")
    scores = [sentiment(text) for text in customer_texts]
    chases = sum(chasing(text) for text in customer_texts)
    trend = scores[-1] - scores[0]
    why = ""
    if chases >= CHASES_TO_ESCALATE:
        why = f"the customer has chased {chases} times since the last reply"
    elif min(scores) <= (STRONGLY_NEGATIVE if len(scores) > 1 else ALONE_STRONGLY_NEGATIVE) and trend <= 0:
        why = f"the customer's sentiment is strongly negative ({min(scores):.2f}) and not recovering"
    return Pressure(chases, sum(scores) / len(scores), trend, bool(why), why)
