"""What an LLM's text states that its input must say: URLs, e-mail addresses, phone numbers, amounts, percentages.

A model told to write only from what it is given can still invent the one thing a reader acts on: a link, an
address to write to, a number to call, a price or a rate. These are easy to find in text and cheap to check, so a
text that states one its input does not is refused: a draft (answers' drafting falls back to the extractive answer)
or a rewritten case (the miner keeps its extractive entry).

Each fact is compared in a normalised form, so that the same fact written another way still matches: a URL without
its scheme, ``www.``, case or trailing punctuation; an address in lower case; a phone number as its digits; an
amount as its currency and value (``$40`` is ``$40.00`` and ``40 USD``); a percentage as its value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Literal

FactKind = Literal["url", "email", "phone", "amount", "percentage"]
_Normaliser = Callable[[re.Match[str]], str | None]


@dataclass(frozen=True, slots=True)
class Fact:
    """One checkable fact a text states, in its normalised form (``value``)."""

    kind: FactKind
    value: str


# Citations ([source-id]) are the draft's own markup, not facts; their digits must not read as a phone number.
_CITATION = re.compile(r"\[[^\[\]\s]{1,200}\](?!\()")
_EMAIL = re.compile(r"[\w.+'-]+@[\w-]+(?:\.[\w-]+)+", re.UNICODE)
_URL = re.compile(
    r"(?:\bhttps?://|\bwww\.)[^\s<>\[\]\"'`]+"
    # A bare host and path (help.example.com/esim) or a bare host with a letters-only top-level domain.
    r"|\b[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*\.[a-z]{2,24}\b(?:/[^\s<>\[\]\"'`]*)?",
    re.IGNORECASE,
)
_NUMBER = r"\d{1,3}(?:[,\u00a0 ]\d{3})+(?:[.,]\d+)?|\d+(?:[.,]\d+)?"
_SYMBOLS = {"$": "USD", "us$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY", "₹": "INR", "chf": "CHF"}
_CODES = {
    "usd": "USD",
    "dollar": "USD",
    "dollars": "USD",
    "eur": "EUR",
    "euro": "EUR",
    "euros": "EUR",
    "gbp": "GBP",
    "pound": "GBP",
    "pounds": "GBP",
    "jpy": "JPY",
    "yen": "JPY",
    "chf": "CHF",
    "inr": "INR",
    "cad": "CAD",
    "aud": "AUD",
}
_BEFORE = r"us\$|[$€£¥₹]|\b(?:usd|eur|gbp|chf|jpy|inr|cad|aud)\b"
_AFTER = r"[$€£¥₹]|\b(?:usd|eur|gbp|chf|jpy|inr|cad|aud|dollars?|euros?|pounds?|yen)\b"
_AMOUNT = re.compile(
    rf"(?P<pre>{_BEFORE})\s?(?P<a>{_NUMBER})|(?P<b>{_NUMBER})\s?(?P<post>{_AFTER})",
    re.IGNORECASE,
)
_PERCENT = re.compile(rf"(?P<n>{_NUMBER})\s?(?:%|\bper\s?cent\b|\bpercent\b)", re.IGNORECASE)
# Seven digits or more, perhaps after a +, grouped by spaces, dots, dashes or brackets: what a phone number looks
# like. An ISO date is not one.
_PHONE = re.compile(r"(?<![\w.,])\+?\(?\d[\d\s().-]{5,}\d(?![\w])")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TRAILING = ".,;:!?)]}'\"/"


def _email(match: re.Match[str]) -> str | None:
    return match.group().rstrip(_TRAILING).lower() or None


def _url(match: re.Match[str]) -> str | None:
    url = match.group().rstrip(_TRAILING).lower()
    url = re.sub(r"^https?://", "", url)
    url = url.removeprefix("www.").rstrip("/")
    return url or None


def _amount(match: re.Match[str]) -> str | None:
    if match.group("pre") is not None:
        currency = _SYMBOLS.get(match.group("pre").lower()) or _CODES[match.group("pre").lower()]
        number = match.group("a")
    else:
        post = match.group("post").lower()
        currency = _SYMBOLS.get(post) or _CODES[post]
        number = match.group("b")
    value = _decimal(number)
    return f"{currency} {value}" if value is not None else None


def _percentage(match: re.Match[str]) -> str | None:
    value = _decimal(match.group("n"))
    return f"{value}%" if value is not None else None


# In this order, each taken out of the text before the next: an address holds a host, a URL holds digits.
_EXTRACTED: tuple[tuple[FactKind, re.Pattern[str], _Normaliser], ...] = (
    ("email", _EMAIL, _email),
    ("url", _URL, _url),
    ("amount", _AMOUNT, _amount),
    ("percentage", _PERCENT, _percentage),
)


def facts(text: str) -> set[Fact]:
    """The checkable facts ``text`` states, each in its normalised form."""
    found: set[Fact] = set()
    text = _CITATION.sub(" ", text)
    for kind, pattern, normalise in _EXTRACTED:
        text = _take(text, kind, pattern, normalise, found)  # taken out, so that its digits are not read again
    for match in _PHONE.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if len(digits) >= 7 and not _ISO_DATE.fullmatch(match.group().strip()):
            found.add(Fact("phone", digits))
    return found


def invented(draft: str, sources: Iterable[str]) -> set[Fact]:
    """The facts ``draft`` (an LLM's text) states that none of ``sources`` (what it was given) does."""
    given: set[Fact] = set()
    for source in sources:
        given |= facts(source)
    return facts(draft) - given


def _take(
    text: str,
    kind: FactKind,
    pattern: re.Pattern[str],
    normalise: _Normaliser,
    found: set[Fact],
) -> str:
    def replace(match: re.Match[str]) -> str:
        value = normalise(match)
        if value is not None:
            found.add(Fact(kind, value))
        return " "

    return pattern.sub(replace, text)


def _decimal(number: str) -> str | None:
    """``1,234.50`` and ``12,50`` (a decimal comma) as plain decimals without trailing zeros: ``1234.5``, ``12.5``."""
    number = number.replace("\u00a0", "").replace(" ", "")
    if re.fullmatch(r"\d+,\d{1,2}", number):
        number = number.replace(",", ".")
    number = number.replace(",", "")
    try:
        value = Decimal(number)
    except InvalidOperation:
        return None
    return format(value.normalize(), "f")
