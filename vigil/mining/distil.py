"""A closed case distilled, extractively, into what it teaches: the problem as the customer put it, the context
they gave (error texts, codes), the analyst's resolving turns, and the outcome.

The rule that picks the turns is measured against the team's labelled cases (``python -m bench.eval_mining``,
docs/evaluation.md), not taken to be "the last analyst message":
- **The problem** is the first customer message that says something beyond a greeting, joined by the next one when
  it is short ("hi" then "my parcel never came"; "hello, quick question" then the question).
- **The resolving turns** are the analyst's messages that carry steps or a fix: instructions ("go to Settings",
  "restart the hub"), what the analyst did ("I've re-sent the code"), explanations ("this happens because"),
  commands and links. Greetings, hand-offs, verification questions, questions back to the customer and sign-offs
  are left out.
  A kept turn keeps only its substance: its greetings, chatter and questions back are dropped.
- **The outcome** is the resolution summary the analyst wrote when closing the case, when there is one.
Nothing here redacts: the miner redacts what it keeps (vigil/mining/redact.py) before it is stored or embedded.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from vigil.mining.select import ClosedCase, Turn

MAX_STEPS = 2
"""The most analyst turns kept as the resolution when they say enough: the rest of a long case is usually diagnosis."""
TERSE_WORDS = 0
"""Kept turns holding fewer words than this make room for more (up to ``TERSE_STEPS``): a chat room's resolution is
several short lines ("sudo apt-get install foo", "then run update-grub"), a written chat's one or two paragraphs."""
TERSE_STEPS = 6
KEEP_SHARE = 0.25
"""A turn is kept only when it scores at least this share of the best turn's score."""
_SHORT = 8
"""A first customer message of fewer words than this is joined by the next."""

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\u2019_./-]*")
_GREETING = re.compile(
    r"^\s*(?:(?:hi|hello|hey|hiya|good (?:morning|afternoon|evening)|dear \w+|greetings|yo)\b[\s,!.:-]*)+"
    r"(?:there\b[\s,!.-]*|team\b[\s,!.-]*|all\b[\s,!.-]*)?",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_CHATTER = re.compile(
    r"^(?:thanks?|thank you|thx|ty|cheers|ok(?:ay)?|great|perfect|brilliant|awesome|cool|sure|no problem|np|bye|"
    r"goodbye|you'?re welcome|one moment|bear with me|let me (?:check|have a look|look)|"
    r"give me a (?:moment|minute|sec)|happy to help|glad (?:i could|to) help|have a (?:great|good|nice) \w+|"
    r"is there anything else|anything else|you'?re now chatting|i'?m sorry|sorry (?:about|for) (?:that|the wait))\b",
    re.IGNORECASE,
)
_INTRO = re.compile(
    r"^(?:[\w\[\]]+,\s*)?(?:i'?m|my name is|this is|it'?s) \[?[A-Z]\w*\]?(?: from [\w ]+| here)?[.!]?$",
    re.IGNORECASE,
)
"""An analyst introducing themselves ("Hi Dana, I'm Megan."; the greeting is already gone)."""
_VERIFY = re.compile(
    r"\b(?:can|could|would) you (?:please )?(?:confirm|provide|give me|send me|share|tell me)\b|"
    r"\bfor security\b|\bverify\b|\bdate of birth\b|\bpostcode\b|\baccount number\b|\border number\b",
    re.IGNORECASE,
)
_STEP = re.compile(
    r"(?:^|[.!?]\s+|\n)\s*(?:please\s+|just\s+|then\s+|now\s+|first,?\s+|next,?\s+)?"
    r"(?:go|open|tap|click|press|select|choose|turn|switch|restart|reboot|reset|unplug|plug|hold|wait|try|run|"
    r"type|enter|install|remove|uninstall|update|upgrade|check|make sure|log ?in|sign in|delete|add|edit|use|"
    r"set|change|disable|enable|download|upload|copy|paste|move|reply|call|visit|follow|scan|re-?insert|"
    r"re-?start|re-?send|sudo|apt|apt-get)\b",
    re.IGNORECASE,
)
_DID = re.compile(
    r"\b(?:i'?ve|i have|i'?ll|i will|we'?ve|we have|i just|i'?ve just|i went ahead and|i'?ve gone ahead and)\s+"
    r"(?:now\s+|just\s+|also\s+)?(?:\w+ed|sent|set|put|made|done|issued|raised|booked|reset|re-?sent|refunded|"
    r"credited|applied|arranged|cancelled|canceled|escalated|logged|added|removed|changed|updated|fixed)\b",
    re.IGNORECASE,
)
_EXPLAIN = re.compile(
    r"\b(?:this (?:is|happens) because|the reason|that'?s because|caused by|you(?:'ll)? need to|you can|you should|"
    r"you have to|you must|the fix|to fix|the way to|what you do is|it should|it will|you will|you'll)\b",
    re.IGNORECASE,
)
_TECHNICAL = re.compile(
    r"`[^`]+`|https?://\S+|(?:^|\s)/[\w./-]+|\b[\w-]+\.(?:conf|list|log|sh|exe|cfg|ini)\b|"
    r"(?<=\w)\s+--?[a-zA-Z][\w-]*|\s\|\s*[a-z]"
)
"""Commands (quoted, with options, piped), links, paths and config files: what a terse answer in a chat room holds
("lspci -v", "dmesg | grep usb"), and a step written out carries."""
_TRIGGER = re.compile(r"^!\S+")
"""A chat room's call for a bot's canned answer."""
_ERROR = re.compile(
    r"[\"\u201c][^\"\u201d]{6,120}[\"\u201d]|\b(?:error|err|code|fault)\s*[:#]?\s*[A-Z]*-?\d[\w-]*|\b0x[0-9a-f]{4,}\b|"
    r"\b[A-Z]{1,4}-\d{2,5}\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Distilled:
    """What one case teaches, in the customer's and the analyst's own words (as ``distil`` gives it, not yet
    redacted; the miner redacts a copy, which the LLM may rewrite)."""

    problem: str
    problem_ids: tuple[str, ...]
    """The customer messages the problem was taken from."""
    context: tuple[str, ...]
    """Error texts and codes the customer quoted."""
    steps: tuple[str, ...]
    step_ids: tuple[str, ...]
    """The analyst messages the steps were taken from, in the conversation's order."""
    outcome: str | None
    analyst_words: int
    """How many words the analysts said beyond greetings and sign-offs: how much the case can teach."""
    instructive: bool = False
    """A step tells the customer what to do or how things work (an instruction, a command, a path or link, "you
    need to"), not only what the analyst did ("I've passed it on") or an acknowledgement."""

    def thin(self, min_words: int) -> bool:
        """Too thin to teach: the analysts said fewer than ``min_words`` words and no step instructs. A chat room's
        whole resolution can be "sudo apt-get install foo": its words are few, and it is what the next helper says."""
        return self.analyst_words < min_words and not self.instructive


def distil(case: ClosedCase, *, terse_words: int | None = None) -> Distilled | None:
    """What ``case`` teaches, or None when it has no customer problem or no analyst turn with a resolution
    (``terse_words``: see ``resolving``)."""
    unaddressed = _unaddress(case)
    turns = _called_up([replace(t, text=unaddressed(t.text)) for t in case.turns])
    customer = [t for t in turns if t.role == "customer" and words(_GREETING.sub("", t.text))]
    analyst = [t for t in turns if t.role == "analyst"]
    if not customer:
        return None
    problem_turns = _problem(customer)
    chosen = resolving(analyst, terse_words=terse_words)
    if not chosen:
        return None
    problem = " ".join(_GREETING.sub("", t.text).strip() for t in problem_turns)
    context = tuple(dict.fromkeys(m.group(0).strip() for t in customer for m in _ERROR.finditer(t.text)))[:3]
    steps = tuple(_one_line(substance(t.text)) for t in chosen)
    return Distilled(
        problem=_one_line(problem),
        problem_ids=tuple(t.message_id for t in problem_turns),
        context=context,
        steps=steps,
        step_ids=tuple(t.message_id for t in chosen),
        outcome=_one_line(case.summary) if case.summary and case.summary.strip() else None,
        analyst_words=sum(
            words(s) for t in analyst for s in map(_clean, _SENTENCE.split(t.text)) if s and not _chatter(s)
        ),
        instructive=any(map(instructs, steps)),
    )


def resolving(
    analyst: list[Turn],
    *,
    most: int = MAX_STEPS,
    share: float = KEEP_SHARE,
    terse_words: int | None = None,
    terse_most: int = TERSE_STEPS,
) -> list[Turn]:
    """The analyst turns that carry the resolution, in order: each scoring at least ``share`` of the best one's
    score, the best first, later turns winning ties (a case's fix comes after its diagnosis); at most ``most``, or
    up to ``terse_most`` while those kept hold fewer than ``terse_words`` words."""
    budget = TERSE_WORDS if terse_words is None else terse_words
    scored = [(score(t.text), n, t) for n, t in enumerate(analyst)]
    top = max((s[0] for s in scored), default=0.0)
    kept = [s for s in scored if s[0] > 0 and s[0] >= share * top]
    ranked = sorted(kept, key=lambda s: (-s[0], -s[1]))
    best = ranked[:most]
    said = sum(words(substance(t.text)) for _, _, t in best)
    for s in ranked[most:terse_most]:
        if said >= budget:
            break
        best.append(s)
        said += words(substance(s[2].text))
    return [t for _, _, t in sorted(best, key=lambda s: s[1])]


def score(text: str) -> float:
    """How much an analyst's message reads as resolving: steps, actions taken, explanations, commands and links
    count; chatter, verification and questions back count against it. Zero or less: not a resolving turn."""
    sentences = [_clean(s) for s in _SENTENCE.split(text)]
    substantive = [s for s in sentences if s and not _chatter(s) and not _VERIFY.search(s)]
    if not substantive:
        return 0.0
    questions = sum(1 for s in substantive if s.endswith("?"))
    if questions == len(substantive):
        return 0.0
    cues = len(_STEP.findall(text)) + len(_DID.findall(text))
    value = (
        2.0 * cues
        + 1.0 * len(_EXPLAIN.findall(text))
        + 1.5 * len(_TECHNICAL.findall(text))
        + min(sum(words(s) for s in substantive), 60) / 20
        - 1.0 * questions
    )
    return value if cues or _TECHNICAL.search(text) or words(" ".join(substantive)) >= 4 else 0.0


def instructs(text: str) -> bool:
    """Whether ``text`` tells the customer what to do or how things work: an instruction, a command, a path or a
    link, an explanation."""
    return any(p.search(text) for p in (_STEP, _EXPLAIN, _TECHNICAL))


def ungreeted(text: str) -> str:
    """``text`` without the greeting it opens with, on one line."""
    return _one_line(_GREETING.sub("", text))


def words(text: str) -> int:
    return len(_WORD.findall(text))


def _unaddress(case: ClosedCase) -> Callable[[str], str]:
    """A message without the participant it is addressed to ("dana: run ...", "sam.k, try ..."), as chat rooms
    address: a step then starts the message, as in a chat of two, and the resolution keeps no one's name."""
    names = sorted({t.author for t in case.turns if t.author}, key=len, reverse=True)
    if not names:
        return lambda text: text
    pattern = re.compile(r"^\s*@?(?:" + "|".join(map(re.escape, names)) + r")\s*[:,>]+\s*(?=\S)", re.IGNORECASE)
    return lambda text: pattern.sub("", text, count=1)


def _called_up(turns: list[Turn]) -> list[Turn]:
    """The turns, an analyst's call for a canned answer ("!ntfs | dana") replaced by the bot's answer to it: what
    the analyst said, in the words the team keeps for it."""
    kept: list[Turn] = []
    for turn in turns:
        if turn.role == "bot" and kept and kept[-1].role == "analyst" and _TRIGGER.match(kept[-1].text):
            kept[-1] = replace(turn, role="analyst")
        else:
            kept.append(turn)
    return kept


def _problem(customer: list[Turn]) -> list[Turn]:
    first = customer[0]
    if words(_GREETING.sub("", first.text)) < _SHORT and len(customer) > 1:
        return [first, customer[1]]
    return [first]


def substance(text: str) -> str:
    """A resolving turn without its greetings (and whom they greet: "Hi Dana!"), chatter, verification and
    questions back to the customer."""
    kept = [
        s.strip()
        for s in _SENTENCE.split(text)
        if (c := _clean(s))
        and not _chatter(c)
        and not _VERIFY.search(c)
        and not c.endswith("?")
        and not (c != s.strip() and words(c) <= 2 and not instructs(c))
    ]
    return " ".join(kept) or text


def _chatter(sentence: str) -> bool:
    """Politeness and hand-offs: a short sentence of courtesy, or an introduction."""
    return bool(_INTRO.match(sentence)) or (words(sentence) <= 8 and bool(_CHATTER.match(sentence)))


def _clean(sentence: str) -> str:
    return _GREETING.sub("", sentence).strip()


def _one_line(text: str) -> str:
    return " ".join(text.split())
