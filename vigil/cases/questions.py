"""Question detection: does a customer message ask for help or information?

vigil speaks only when the customer asks for something. Rules, not a model: they are fast (microseconds), they
explain themselves (the reason is logged and counted), and they were measured on real support chats
(``docs/evaluation.md``). A message asks when it has a question (a question mark, a question word or an inverted
auxiliary at the start of a clause), a request ("I need", "please help") or a problem report ("not working",
"error", "can't"); it does not when all it holds is a greeting, thanks, an acknowledgement, an emoji, a link, or an
id or number on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_WORD = re.compile(r"[a-z0-9']+")
_QUESTION_WORDS = frozenset(
    "how what why when where which who whom whose whats what's hows how's wheres where's whys wen wat wot hw "
    "anyone anybody someone somebody".split()
)
_AUXILIARIES = frozenset(
    "can could would will is are do does did should may might have has am was were shall isn't aren't don't "
    "doesn't didn't can't won't wouldn't couldn't shouldn't cant dont doesnt didnt wont isnt".split()
)
_SUBJECTS = frozenset(
    "i you we it there this that they he she my your the a an anyone anybody someone somebody u ya these "
    "those me".split()
)
_OPENING_AUXILIARIES = frozenset("is are does do can has was were did".split())
# What may come before a question's first word: "hi, can I...", "so is it...".
_LEAD_INS = frozenset("hi hello hey hiya ok okay so and but also well please then".split())
_REQUEST = re.compile(
    r"\b(i need|i want(?! to say)|i'd like|i would like|i wanna|i'm trying|im trying|i am trying|trying to|"
    r"help me|help with|"
    r"please help|pls help|need help|can't|cannot|cant|couldn't|unable to|won't|wont|doesn't|doesnt|don't work|"
    r"isn't|not work|stopped work|no longer|broken|error|fail|failed|fails|crash|stuck|problem|issue|wrong|"
    r"missing|lost|charged|refund|cancel|how to|where to|any idea|any ideas|is there a way|tell me|let me know|"
    r"no internet|no signal|no service|no sound|keeps|still|never arrived|hasn't|haven't|didn't|didnt|"
    r"wondering|it says|says|denied|not found|nothing found|can't find|cant find|don't see|dont see|"
    r"don't have|dont have|i tried|i've tried|ive tried|i try|will not|i get|any good|recommend|suggest|"
    r"is down|are down|went down|outage|flashing|nothing loads|nothing works|slow|dropp|disconnect|"
    # asking without a question: "I just wanted to check", "do you know if"
    r"check if|check whether|checking if|checking whether|wanted to check|just checking|want to know|"
    r"wanted to ask|like to know|know if|know whether|"
    # a request with no subject, or put politely: "need a courtesy car", "pls call me back", "can you put a note"
    r"(?:can|could|would|will) (?:you|u|someone|somebody|anyone)|"
    r"(?:please|pls|plz) (?:call|ring|send|resend|stop|cancel|change|update|check|book|put|add|remove|reset|"
    r"confirm|email|arrange|fix|look|sort|move|delete|switch|close|open|contact|explain)|"
    # symptoms: "isnt working", "solid red light", "parcel damaged", "stopped syncing", "went out twice"
    r"isnt|arent|wasnt|not letting|spins|spinning|frozen|freez|damaged|cracked|broke|leak|flood|disappear|"
    r"dissapear|duplicat|twice|double|overcharg|out of order|stopped \w+ing|supposed to|never got|"
    r"(?:solid|orange|red|amber|blinking|blue|white|green) light|lights? (?:are|is) (?:all )?(?:off|out)|crack|"
    # complaints that want something done: "nobody told me", "worse than before", "sort this out"
    r"nobody|worse|worst|don't understand|dont understand|question about|query about|quick question|"
    r"(?:^|[.!;,]\s*|\bthen\s+)(?:sort|bring|book|fix|refund|cancel|resend) (?:it|this|them|that|me|my|the))\w*"
)
_NEEDS = re.compile(r"^(?:(?:hi|hello|hey|so|and|also|oh|ok|okay)\W+)*(?:need|needs|want|wanting|would like)\b")
# Goodbyes that start like a question: "have a nice day", "have a good weekend".
_GOODBYE = re.compile(r"\bhave a (?:nice|good|great|lovely|wonderful) (?:day|weekend|evening|night|one|week)\b")
_TURN = re.compile(r"\b(?:but|also|another|one more|however|still not|still no|still can't|still cant)\b")
_THANKS = re.compile(r"^(?:(?:ok|okay|great|brilliant|perfect|lovely)\W+)?(?:thank|thanks|thx|ty|cheers)\b")
_SMALL_TALK = frozenset(
    "hi hello hey hiya yo morning evening afternoon good thanks thank thx ty cheers ok okay k kk ack cool great "
    "perfect nice awesome brilliant lovely sure yes yeah yep yup no nope nah fine alright right got it that "
    "worked works done one sec second moment min minute brb bye goodbye later np lol haha hmm ah oh so much you "
    "very a lot all again well everyone there guys anyone here please wait hold on trying now will try let me "
    "check see just i appreciate help the for your u ta sorry".split()
)
_LINK = re.compile(r"^(https?://|www\.)\S+$", re.IGNORECASE)
_ID_TOKEN = re.compile(r"[#:]?[0-9A-Za-z\-_/.]*[0-9][0-9A-Za-z\-_/.]*")
_ID_PREFIX = re.compile(r"[A-Za-z]{1,8}[:#]?")


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a message asks, and the rule that decided."""

    asks: bool
    reason: str


def classify(text: str) -> Verdict:
    """Decide whether a customer message asks for help or information."""
    stripped = text.strip()
    if not stripped:
        return Verdict(False, "empty")
    if _LINK.match(stripped):
        return Verdict(False, "link")
    if _identifier(stripped):
        return Verdict(False, "identifier")
    lowered = stripped.lower().replace("\u2019", "'")  # typographic apostrophe
    words = _WORD.findall(lowered)
    if not words:
        return Verdict(False, "no_words")
    if _only_small_talk(words):
        return Verdict(False, "small_talk")
    if "?" in stripped:
        return Verdict(True, "question_mark")
    if _opens_question(_GOODBYE.sub("", lowered)):
        return Verdict(True, "question_form")
    if _THANKS.match(lowered) and not _TURN.search(lowered):
        return Verdict(False, "thanks")  # thanks, however it goes on, unless it turns to something new
    if _REQUEST.search(lowered) or _NEEDS.match(lowered):
        return Verdict(True, "request_or_problem")
    return Verdict(False, "statement")


def asks(text: str) -> bool:
    """Shorthand for ``classify(text).asks``."""
    return classify(text).asks


def _identifier(text: str) -> bool:
    """An id or number on its own ("BW-448120", "order 88231", "4471 2290"): every word holds a digit, but for
    one short word before them. "5G not working" is not one: its other words are words."""
    tokens = text.split()
    if tokens and _ID_PREFIX.fullmatch(tokens[0]) and len(tokens) > 1:
        tokens = tokens[1:]
    return bool(tokens) and all(_ID_TOKEN.fullmatch(token) for token in tokens)


def _only_small_talk(words: list[str]) -> bool:
    return all(w in _SMALL_TALK for w in words)


def _opens_question(lowered: str) -> bool:
    """A clause that starts like a question: a question word, or an auxiliary before its subject."""
    for number, clause in enumerate(re.split(r"[.!;,\n]+|\s-+\s|\bbut\b|\band\b|\bso\b|\balso\b", lowered)):
        words = _WORD.findall(clause)
        while len(words) > 2 and words[0] in _LEAD_INS | {"quick", "one"}:
            words.pop(0)
        if len(words) < 2:
            continue
        first, second = words[0], words[1]
        if first in _QUESTION_WORDS and second not in {"s", "ever"}:
            return True
        if first in _AUXILIARIES and second in _SUBJECTS:
            return True
        # "is parcelo open on bank holiday monday": a message that opens with one of these auxiliaries asks,
        # whatever its subject ("will fill it in tonight" and "can't wait" do not).
        if number == 0 and first in _OPENING_AUXILIARIES and len(words) >= 3 and second not in {"do", "wait"}:
            return True
    return False


def asks_yes_or_no(text: str) -> bool:
    """Whether the customer asks a yes/no question ("can I keep my number?", "is there a fee?"): a question of
    theirs whose first word, after a greeting or "so", is an auxiliary verb. Their questions are the sentences
    that end in "?"; without one, every sentence."""
    lowered = text.lower().replace("\u2019", "'")
    sentences = [s for s in re.split(r"(?<=[.!?])\s+|\n+", lowered) if s.strip()]
    questions = [s for s in sentences if s.rstrip().endswith("?")] or sentences
    for question in questions:
        for clause in re.split(r"[,;:]", question):
            words = _WORD.findall(clause)
            while words and words[0] in _LEAD_INS:
                words.pop(0)
            if words and words[0] in _AUXILIARIES:
                return True
    return False
