"""Commitments: the promises in an analyst's message ("I'll call you back by 3pm"), and when each falls due.

A promise is found from its trigger ("I'll", "we'll", "I'm going to", "let me escalate", "you'll hear from me") to
the end of its clause; a clause holding two deliverables ("send the report tomorrow and call you on Monday") is cut
in two, while a means and its reply ("check with engineering and get back to you") stay one. Questions, offers
that wait on the customer ("if you like"), things done in the chat ("let me have a look, one moment"), courtesy
("I'll be here") and the past ("I said I'd call") are not promises. The caller passes analyst messages only: a
customer's "I'll send the meter reading" is excluded by role, not by text.

Its due time is read by vigil/progress/due.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from vigil.progress.due import TIME_WORDS, Times, has_time
from vigil.progress.hours import WEEKDAYS_NINE_TO_FIVE, Calendar

__all__ = ["Promise", "find_promises", "follows_up"]


@dataclass(frozen=True, slots=True)
class Promise:
    """One promise in an analyst's message.

    Attributes:
        what: a short phrase of what was promised ("check with engineering and get back to you").
        due_at: the latest moment it is still kept, aware UTC; None when no time or only a vague one was given.
        start: where the promise's words start in the text.
        end: where they end (exclusive).
    """

    what: str
    due_at: datetime | None
    start: int
    end: int


_SENTENCE = re.compile(r"(?:[^.!?\n]|[.!?](?=[^\s.!?]))+[.!?]*")
_ON_BEHALF = (
    r"(?:I(?:'m| am) (?:getting|asking|having) )?our (?:[\w-]+ ){0,2}"
    r"(?:team|department|engineers?|specialists?|colleagues?|manager)(?: will|'ll| to)"
    r"(?=(?: [\w-]+){1,3} (?:you|your)\b)"
)
"""A promise the analyst makes to the customer for a team ("our accounts team will come back to you within 2 working
days"); what a team will do without a word to the customer is how things go ("our engineers will roll out the fix on
September 17")."""
_TRIGGER = re.compile(
    r"\b(?:I'll|I will|we'll|we will|I(?:'m| am) going to|we(?:'re| are) going to|I promise to|let me|let us"
    rf"|{_ON_BEHALF}"
    r"|you'll (?:hear|get|have)\b(?=[^.!?]*\bfrom (?:me|us)\b)|expect\b(?=[^.!?]*\bfrom (?:me|us)\b))",
    re.IGNORECASE,
)
_NOT_A_PROMISE = re.compile(
    r"\s*(?:just\s+)?(?:be (?:here|around|available)|leave (?:you|it)|let you go|wait\b|not\b|never\b|need\b"
    r"|(?:do|sort|action) (?:that|this|it) (?:now|right away|straight away)\b)",
    re.IGNORECASE,
)
"""What follows a trigger in courtesy ("I'll be here"), refusals ("we will not"), needs ("we'll need an engineer")
and work done at once, while the customer waits ("I'll do that now")."""
_CONDITION = re.compile(
    r"\b(?:otherwise|come back to (?:us|me)|(?:contact|call|message) (?:us|me)|get in touch|let (?:us|me) know"
    r"|(?:once|as soon as|after|when) you(?:'ve| have)?|if you can)\b",
    re.IGNORECASE,
)
"""Before a trigger in its sentence: a promise that waits on the customer's next move ("if it happens again, come
back to us and we'll replace it"; "otherwise I'll close it"; "as soon as you send the photos I'll raise the
claim"). One that waits on an event the analyst watches for is
kept ("if the test fails tonight, I'll call you first thing")."""
_LET_ME_LATER = re.compile(
    r"\s*(?:just\s+)?(?:escalate|check with|talk|speak|ask|raise|chase|find out|look into|get back|come back|follow"
    r"|pass|refer|send|arrange|book|call|ring|email|update|confirm)\b",
    re.IGNORECASE,
)
"""After "let me": work whose answer comes after the chat (not "let me have a look", done while the customer waits)."""
_IN_CHAT = re.compile(
    r"\b(?:one (?:moment|sec|second|minute)|just a (?:moment|sec|minute)|give me a (?:moment|sec|minute))",
    re.IGNORECASE,
)
_OFFER = re.compile(r"\bif (?:you|that(?:'s| is| would| suits))\b|\bhappy to\b|\bif it helps\b", re.IGNORECASE)
"""An offer that waits on the customer ("I can call you tomorrow if you like"): not a promise yet."""
_WAITS_ON_CUSTOMER = re.compile(r"\b(?:once|as soon as|after|when) you(?:'ve| have)?\b", re.IGNORECASE)
"""After a promise, in its clause: it waits on the customer ("I'll update the name once you've sent the
certificate")."""
_PURPOSE = re.compile(r"(?:,\s*|\s+)so(?: that)? (?:you|we|it|they|there)(?:'re|'s| are| is)?\b", re.IGNORECASE)
"""Where a promise's clause ends and its purpose begins: "this Friday, so you can sign next week"."""
_THEN_OFFER = re.compile(r";|(?:,|\s+[-\u2013\u2014])\s*(?:and|but)?\s*(?=if\b)", re.IGNORECASE)
"""Where a promise ends and an offer begins: "I'll check your eligibility today; if you qualify, I can apply it"."""
_AND = re.compile(
    r",?\s+and\s+(?:then\s+)?(?P<subject>(?:I'll|I will|we'll|we will|you'll|I'm going to)\s+)?", re.IGNORECASE
)
_DELIVERY_VERB = re.compile(
    r"(?:(?:call|ring|phone|send|email|e-mail|message|text|post|drop|schedule|book|arrange|update|confirm|chase"
    r"|raise|escalate|get|give|have|make|check|follow|reach|let|be in touch|come back|pick|refund|apply|dispatch"
    r"|ship|deliver|rebook|process|cancel|credit|reset|replace|collect|install|fix|courier|issue|reissue|waive"
    r"|move|switch|submit|lodge|log|order|upgrade|reconnect|restore|remove|add|change|amend|transfer|return|renew"
    r"|reverse|release|activate|unblock|close|open|mail)(?:s|e?d|led|ped|ted|ing)?|sent|made|given|got|rung)\b",
    re.IGNORECASE,
)
_MEANS = re.compile(
    r"^\W*(?:let me|I'll|we'll|I will|we will)\s+(?:just\s+)?(?:check|look|talk|speak|ask|find out|have a look"
    r"|investigate|dig)\b",
    re.IGNORECASE,
)
"""A clause that is the means of a reply: "let me check with billing and I'll come back to you" is one promise."""
_ESCALATE = re.compile(r"\bescalat", re.IGNORECASE)


def warm_up() -> None:
    """Load dateparser's English data (about 0.2 s) and the zone database's cities now, not on the first promise with
    a calendar date or a zone named by its city."""
    sent_at = datetime(2026, 1, 1, tzinfo=UTC)
    find_promises("I'll call you at 3 Madrid time on 21 May.", sent_at=sent_at, zone=ZoneInfo("UTC"))


def find_promises(
    text: str, *, sent_at: datetime, zone: ZoneInfo, calendar: Calendar = WEEKDAYS_NINE_TO_FIVE
) -> list[Promise]:
    """The analyst's promises in ``text``, in text order, each with its due time.

    Args:
        text: one analyst message.
        sent_at: when it was sent (aware).
        zone: the customer's time zone when known, else the tenant's: a time without a zone is read in it.
        calendar: the tenant's business hours, for working days and hours.
    """
    clean = text.replace("\u2019", "'")  # same length: spans stay valid in ``text``
    if not _TRIGGER.search(clean):
        return []  # most messages: no sentence to read
    promises: list[Promise] = []
    for sentence in _SENTENCE.finditer(clean):
        spans, shared = _promise_spans(sentence.group(), sentence.start())
        for start, end in spans:
            clause = clean[start:end]
            if shared and not has_time(clause):
                clause = f"{shared} {clause}"  # "By Friday I'll have updated X and sent you Y": both by Friday
            when = Times(clause, clean[sentence.start() : start], sent_at, zone, calendar)
            promise = Promise(_what(clean[start:end]), when.due_at(), start, end)
            if promises and _replies_to(promises[-1], promise, clean):
                means = promises.pop()  # "Let me check with network ops. You'll hear from me within the hour."
                promise = Promise(means.what, promise.due_at, means.start, end)
            promises.append(promise)
    return promises


_LEAD_FILLER = frozenset("by before on at the of so ok okay right then and first thing well".split())


def _time_lead(lead: str) -> bool:
    """Whether the words before a sentence's first promise are only its time ("Tomorrow", "By the end of the day"),
    which then is the time of each promise in the sentence that names none. Not a condition's time ("If the meter
    still isn't sending readings by tomorrow, I'll book an engineer"), nor another clause's."""
    if not has_time(lead):
        return False
    rest = lead
    for pattern in TIME_WORDS:
        rest = pattern.sub(" ", rest)
    return all(word.lower() in _LEAD_FILLER for word in re.findall(r"[A-Za-z']+", rest))


_REPLY = re.compile(
    r"(?:you'll (?:hear|get|have)|I'll (?:get|come) back|(?:I|we)'ll be in touch"
    r"|I'll (?:update|call|ring|phone|email|e-mail|message|text) you|expect)\b",
    re.IGNORECASE,
)
"""How a promise to report back starts ("you'll hear from me within the hour", "I'll get back to you by 3")."""


def _replies_to(means: Promise, reply: Promise, text: str) -> bool:
    """Whether ``reply``, in the sentence after ``means``, is the report of that check: one promise, the reply's time
    ("Let me check with network ops. You'll hear from me within the hour.")."""
    return (
        reply.due_at is not None
        and re.fullmatch(r"[\s.!;,]*", text[means.end : reply.start]) is not None
        and _MEANS.match(text[means.start : means.end]) is not None
        and _REPLY.match(text, reply.start) is not None
    )


def _promise_spans(sentence: str, offset: int) -> tuple[list[tuple[int, int]], str]:
    """Character spans (in the whole text) of the promises in one sentence, and the words before the first of them
    when they are only a time that every promise of the sentence shares ("Tomorrow I'll ... and ..."; else "")."""
    if sentence.rstrip().endswith("?"):
        return [], ""
    offers = list(_OFFER.finditer(sentence))
    if offers:
        offer = offers[-1]  # the last: "check if you're eligible" is not an offer
        # An offer after a promise ("...today; if you qualify, I can apply it") leaves the promise before it.
        joints = [
            j
            for j in _THEN_OFFER.finditer(sentence)  # not up to the offer: a joint looks ahead at its "if"
            if j.start() < offer.start() and _TRIGGER.search(sentence, 0, j.start())
        ]
        if not joints:
            return [], ""
        sentence = sentence[: joints[-1].start()]
    triggers: list[re.Match[str]] = []
    for trigger in _TRIGGER.finditer(sentence):
        if _is_promise(trigger, sentence) and not (
            triggers and _is_reply(sentence[triggers[-1].start() : trigger.start()])
        ):
            triggers.append(trigger)
    purpose = _PURPOSE.search(sentence)
    lead = sentence[: triggers[0].start()] if triggers else ""
    shared = _time_lead(lead)  # "Tomorrow I'll ... and ...": one time for both
    spans = []
    for i, trigger in enumerate(triggers):
        stop = triggers[i + 1].start() if i + 1 < len(triggers) else len(sentence)
        if purpose is not None and trigger.end() < purpose.start() < stop:
            stop = purpose.start()  # "..., so you can sign next week": why, not when
        stop = len(_TAIL.sub("", sentence[:stop]))
        spans += [(offset + start, offset + end) for start, end in _cut(sentence, trigger.start(), stop, shared=shared)]
    return spans, lead if shared else ""


_TAIL = re.compile(r"(?:[\s,;:.!-]|\b(?:and|then|but)\b)+$", re.IGNORECASE)
"""What ends a clause without belonging to its promise: punctuation, and the "and" before the next promise."""


def _is_promise(trigger: re.Match[str], sentence: str) -> bool:
    after = sentence[trigger.end() :]
    if _NOT_A_PROMISE.match(after) or _CONDITION.search(sentence[: trigger.start()]):
        return False
    if _WAITS_ON_CUSTOMER.search(re.split(r",|;|\band\b", after, maxsplit=1)[0]):
        return False
    if trigger.group().lower() in ("let me", "let us"):
        return bool(_LET_ME_LATER.match(after)) and not _IN_CHAT.search(sentence)
    return True


def _is_reply(left: str) -> bool:
    """Whether the next trigger is the reply of this means: "let me check with billing and I'll come back to you",
    "let me check with the network team; you'll hear from me within the hour"."""
    joined = re.search(r"(?:,?\s+and\s+(?:then\s+)?|\s*[;,]\s*)$", left)
    return bool(_MEANS.match(left) and joined and not has_time(left))


def _cut(sentence: str, start: int, stop: int, *, shared: bool = False) -> Iterator[tuple[int, int]]:
    """One clause's promises: cut at "and" where two deliverables meet, not between a means and its reply. Two
    deliverables meet where each has its own time, or where the time said before both is theirs (``shared``:
    "By Friday I'll have updated your address and sent you new pink slips")."""
    for joint in _AND.finditer(sentence, start, stop):
        left, right = sentence[start : joint.start()], sentence[joint.end() : stop]
        if not _DELIVERY_VERB.match(right):
            continue
        timed = (has_time(left) and has_time(right)) or (shared and not has_time(left + right))
        if (
            _ESCALATE.search(left)
            or (timed and not _MEANS.match(left))
            or (joint.group("subject") and not _MEANS.match(left))
        ):
            yield start, joint.start()
            if joint.group("subject") and not _TRIGGER.match(sentence, joint.start("subject")):
                return  # "... and you'll get the reference by email": a process, not the analyst's promise
            after = joint.start("subject") if joint.group("subject") else joint.end()
            yield from _cut(sentence, after, stop, shared=shared)
            return
    yield start, stop


_LEAD = re.compile(
    r"^(?:I'll|I will|we'll|we will|I(?:'m| am) going to|we(?:'re| are) going to|I promise to|let me|let us|expect"
    rf"|{_ON_BEHALF})\s+"
    r"(?:just\s+|make sure\s+)?",
    re.IGNORECASE,
)


_LOOSE_END = re.compile(
    r"(?:\s+(?:this|that|on|by|at|before|in|within|the|your time|sharp|today|now|right away|straight away|of|and"
    r"|next|after))+$",
    re.IGNORECASE,
)


_DANGLING = re.compile(
    r"\s+(?:by|at|on|before|until|within)(?=\s+(?:with|and|so|to|for|once|when)\b|\s*,)", re.IGNORECASE
)
"""A time's preposition left behind once the time words are gone, before the rest of the promise."""


def _what(span: str) -> str:
    """A short phrase of what was promised: the span without its trigger and its time words."""
    what = _LEAD.sub("", span)
    for pattern in TIME_WORDS:
        what = pattern.sub(" ", what)
    what = re.sub(r"\s+", " ", what).strip(" ,.")
    what = _DANGLING.sub("", what)  # "call you back by with a new slot": its time was "by tomorrow lunchtime"
    what = _LOOSE_END.sub("", what)
    return what or span


# --- follow-ups ---------------------------------------------------------------------------------------------------

_DELIVERED = re.compile(
    r"\b(?:as promised|as mentioned|here'?s|here is|attached|I'?ve (?:just )?(?:\w+ed|sent|spoken|heard|been able"
    r"|got|tried)|(?:has|have) (?:come|got) back|got back to me|heard back|(?:good|great) news|update on|an update"
    r"|quick update|coming back to you|following up on|I tried|reference|ticket|re:?\s|just confirming|confirmed"
    r"|all booked|is booked"
    r"|(?:has|have) been|went through|is in the post|on (?:its|the) way|I'?m afraid|I checked|I spoke)",
    re.IGNORECASE,
)
"""Words of a message that delivers or reports: "here's the report", "I've escalated", "engineering got back to me"."""
_STALLED = re.compile(
    r"\b(?:still (?:checking|waiting|looking|no|pending|ongoing)|no (?:news|word|update)|not yet|haven'?t|yet\b"
    r"|bear with|again\b|shortly|soon|trying to|been trying|waiting (?:to|on|for)|about to|pending|I'?ll|I will"
    r"|nearly there|putting .* together)",
    re.IGNORECASE,
)
"""Words of a message that stalls: "still checking", "no news yet", "I'll call you within the hour"."""
_STOP = frozenset(
    "the a an to and you your customer get back with about if can be see for of on in it this that from me us our "
    "have has will".split()
)


def follows_up(promise_what: str, text: str) -> bool:
    """Whether a later analyst message keeps an open promise (a follow-up that delivers, not one that stalls).

    The rule: the message shares a content word with the promise (by its first four letters: "escalate" and
    "escalation", "call" and "calling"), has words that deliver or report ("here's", "as promised", "I've sent",
    "engineering got back to me", "update on") and none that stall ("still checking", "no news yet", "I'll ...").

    Args:
        promise_what: the promise's ``what`` ("check with engineering and get back to the customer").
        text: a later analyst message of the same conversation.
    """
    clean = text.replace("\u2019", "'")
    return _shares_a_word(promise_what, clean) and bool(_DELIVERED.search(clean)) and not _STALLED.search(clean)


def _stems(text: str) -> set[str]:
    return {w[:4] for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP and len(w) >= 3}


def _shares_a_word(promise_what: str, text: str) -> bool:
    return bool(_stems(promise_what) & _stems(text))
