"""What a resolution decides: whether the customer gets money back, whether a fee applies, whether the company is
liable, whether a decision is final. Two resolutions that take opposite stances on one of these disagree.

Analysts resolve one problem in many wordings: numbered steps or one long message, a link or a paragraph. Two of
them agreeing share only a fifth to two thirds of their words, so a bag-of-words comparison cannot tell a second
wording from a contradiction (on the team's tune company it flagged 57 of 75 agreeing pairs of one problem), and
neither can an embedding ("we can't refund it" sits beside "we'll refund it"). What the contradictions a lead must
see are about, on both of the team's companies and in support generally, is a **decision**: refunded or not,
charged or not, covered or not. Those are few, and their wording is stereotyped: "we'll refund the £6.40" against "I'm
unable to refund it", "free of charge" against "a £25 fee applies". A stance is read per sentence, a decision word
negated when a negation stands within a few words before it ("not able to compensate", "no extra charge",
"non-refundable").
"""

from __future__ import annotations

import re
from collections.abc import Mapping

DECISIONS: Mapping[str, str] = {
    "money_back": r"refund\w*|compensat\w*|reimburs\w*|pay(?:ing)? (?:you )?out|payout|goodwill|money back",
    "fee": r"fees?|surcharges?|charge[sd]?|penalt(?:y|ies)",
    "liable": r"liab(?:le|ility)|responsib(?:le|ility)|covered|eligible",
    "final": r"final|non-?negotiable",
}
"""The decisions a resolution can take a stance on, each by the words that state it."""
_FREE = re.compile(r"\bfree of charge\b|\bfor free\b|\bat no (?:extra )?cost\b|\bfree\b")
"""What says that no fee applies without negating a fee word."""
_NEGATION = re.compile(
    r"(?:\b(?:not|no|never|cannot|can't|can not|won't|unable to|isn't|aren't|don't|doesn't|didn't|wasn't|"
    r"shouldn't|wouldn't|nothing)\b(?:\s+[\w'£.]+){0,4}\s*|\bnon-?|\bfree of\s+)$"
)
"""A negation within four words before a decision word ("not able to compensate", "no extra charge", "non-",
"free of charge")."""
_NOTHING = re.compile(r"\s+(?:nothing|none)\b")
"""A negation right after a decision word ("I've refunded nothing")."""
_WAIVED_BEFORE = re.compile(r"\bwaiv(?:e|ed|es|ing)\b(?:\s+[\w'£.]+){0,4}\s*$")
_WAIVED_AFTER = re.compile(r"(?:\s+[\w']+){0,3}?\s+waived\b")
"""A fee waived ("I've waived the redelivery fee", "the fee has been waived") is a fee that does not apply; a waiver
negated ("we don't waive the fee") is one that does."""
_SENTENCES = re.compile(r"(?<=[.!?;])\s+|\n+|\b(?:but|however|although)\b")
_DECISION = {name: re.compile(rf"\b(?:{words})\b") for name, words in DECISIONS.items()}


def stances(text: str) -> dict[str, frozenset[int]]:
    """The decisions ``text`` takes a stance on, each with the stances it takes: 1 (it is so), -1 (it is not), both
    when it says both ("you don't pay again... free of charge" is -1 only; "no refund for the fee, but a refund of
    the postage" is both)."""
    found: dict[str, set[int]] = {}
    for sentence in _SENTENCES.split(text.lower().replace("\u2019", "'")):
        if not sentence.strip():
            continue
        for name, pattern in _DECISION.items():
            for match in pattern.finditer(sentence):
                before = sentence[max(0, match.start() - 48) : match.start()]
                negated = _NEGATION.search(before) is not None or _NOTHING.match(sentence, match.end()) is not None
                if name == "fee" and (_WAIVED_BEFORE.search(before) or _WAIVED_AFTER.match(sentence, match.end())):
                    negated = not negated
                found.setdefault(name, set()).add(-1 if negated else 1)
        if _FREE.search(sentence):
            found.setdefault("fee", set()).add(-1)
    return {name: frozenset(said) for name, said in found.items()}


def opposed(a: str, b: str) -> str | None:
    """The decision on which ``a`` and ``b`` take opposite stances, each a single one (None: they do not oppose;
    a text that says both ways on a decision opposes nothing on it)."""
    said_a, said_b = stances(a), stances(b)
    for name in DECISIONS:
        one, other = said_a.get(name), said_b.get(name)
        if one is not None and other is not None and len(one) == 1 and len(other) == 1 and one != other:
            return name
    return None
