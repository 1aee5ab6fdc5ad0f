"""Redaction: personal data replaced by placeholders before anything mined is stored or embedded.

The miner is to run every message of a case through one ``Redactor`` before distilling it, so nothing personal reaches
the knowledge store, its vectors or a reviewer: e-mail addresses ``[EMAIL]``, phone numbers ``[PHONE]``, payment
cards ``[CARD]``, IBANs ``[IBAN]``, IP addresses ``[IP]``, MAC addresses ``[MAC]``, postal addresses ``[ADDRESS]``,
birth dates ``[DATE_OF_BIRTH]``, account, order, ticket and other identifiers ``[ID]``, and people's names
``[NAME]``. What only looks like them is kept, because the knowledge needs it: versions (22.04, 5.15.0-91), speeds,
prices, error codes, model numbers, ordinary dates and times, and the company's own public numbers and product
names, passed as ``keep``.

How candidates combine: each finder proposes spans; a look-alike (or a ``keep`` string) shields what it covers
from the weaker finders (phone, address, identifier, name) but not from the checked ones (card, IBAN, IP, MAC,
e-mail, birth date); overlapping personal spans are merged, so a redaction never leaves a piece of one behind.
Placeholders are never found again, so redacting a redacted text changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import phonenumbers

from vigil.mining import pii_address, pii_patterns
from vigil.mining.pii_names import NameFinder, known_parts
from vigil.mining.pii_patterns import Found

PLACEHOLDERS = {
    "email": "[EMAIL]",
    "phone": "[PHONE]",
    "card": "[CARD]",
    "iban": "[IBAN]",
    "ip": "[IP]",
    "mac": "[MAC]",
    "address": "[ADDRESS]",
    "birth_date": "[DATE_OF_BIRTH]",
    "identifier": "[ID]",
    "name": "[NAME]",
}
# Which finder's span wins where two overlap; a look-alike beats the kinds ranked below it.
_RANK = {
    "email": 9,
    "mac": 8,
    "iban": 7,
    "card": 6,
    "birth_date": 5,
    "ip": 4,
    "keep": 3,
    "phone": 2,
    "address": 1,
    "identifier": 1,
    "name": 0,
}
_COMPANY = 10


@dataclass(frozen=True, slots=True)
class Span:
    """One redacted stretch: offsets in the ORIGINAL text, and its kind."""

    start: int
    end: int
    kind: str


@dataclass(frozen=True, slots=True)
class Redacted:
    """The text with each span replaced by its placeholder, and the spans."""

    text: str
    spans: tuple[Span, ...]


class Redactor:
    """Finds and replaces personal data in support messages. Build it once: it loads the name lists.

    Args:
        keep: strings kept verbatim wherever they appear (the company's public phone numbers, product names);
            a phone number is kept however it is written (``+44 20 7946 0321`` keeps ``020 7946 0321``).
    """

    def __init__(self, *, keep: Iterable[str] = ()) -> None:
        kept = [value.strip() for value in keep if value.strip()]
        self._keep = _keep_pattern(kept)
        self._kept_numbers = {number for value in kept if (number := _e164(value))}
        self._names = NameFinder()

    def redact(self, text: str, *, names: Iterable[str] = ()) -> Redacted:
        """``text`` with its personal data replaced.

        Args:
            names: people known to the case (message authors), found in full or by part, in any case.
        """
        found = self._candidates(text, known_parts(names))
        spans = _resolve(found)
        return Redacted(_replace(text, spans), tuple(spans))

    def _candidates(self, text: str, known: set[str]) -> list[Found]:
        found: list[Found] = []
        if self._keep is not None:
            found.extend(Found(match.start(), match.end(), "company") for match in self._keep.finditer(text))
        found.extend(pii_patterns.look_alikes(text))
        found.extend(pii_patterns.emails(text))
        if any(char.isdigit() for char in text):
            found.extend(pii_patterns.macs(text))
            found.extend(pii_patterns.ibans(text))
            found.extend(pii_patterns.cards(text))
            found.extend(pii_patterns.ips(text))
            found.extend(pii_patterns.dates(text))
            found.extend(self._phones(text))
            found.extend(pii_address.addresses(text))
            found.extend(pii_patterns.identifiers(text))
        found.extend(self._names.find(text, known))
        return found

    def _phones(self, text: str) -> Iterable[Found]:
        for phone in pii_patterns.phones(text):
            if _e164(text[phone.start : phone.end]) in self._kept_numbers:
                yield Found(phone.start, phone.end, "company")
            else:
                yield phone


def _rank(found: Found) -> int:
    return _COMPANY if found.kind == "company" else _RANK[found.kind]


def _resolve(found: list[Found]) -> list[Span]:
    """Drop the personal spans a stronger look-alike covers, then merge the overlapping personal ones."""
    shields = [item for item in found if item.kind in ("keep", "company")]
    personal = [
        item
        for item in found
        if item.kind in PLACEHOLDERS
        and item.end > item.start
        and not any(
            shield.start < item.end and item.start < shield.end and _rank(shield) > _rank(item) for shield in shields
        )
    ]
    personal.sort(key=lambda item: (item.start, -item.end))
    merged: list[Span] = []
    for item in personal:
        if merged and item.start < merged[-1].end:
            last = merged[-1]
            kind = last.kind if _RANK[last.kind] >= _RANK[item.kind] else item.kind
            merged[-1] = Span(last.start, max(last.end, item.end), kind)
        else:
            merged.append(Span(item.start, item.end, item.kind))
    return merged


def _replace(text: str, spans: list[Span]) -> str:
    pieces: list[str] = []
    cursor = 0
    for span in spans:
        pieces.extend((text[cursor : span.start], PLACEHOLDERS[span.kind]))
        cursor = span.end
    pieces.append(text[cursor:])
    return "".join(pieces)


def _keep_pattern(kept: list[str]) -> re.Pattern[str] | None:
    """One pattern for the kept strings, tolerant of how spaces, dots and dashes are written between their parts."""
    if not kept:
        return None
    alternatives = []
    for value in sorted(kept, key=len, reverse=True):
        pieces = [re.escape(piece) for piece in re.split(r"[\s.-]+", value) if piece]
        alternatives.append(r"[\s.-]?".join(pieces))
    return re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + r")(?!\w)", re.IGNORECASE)


def _e164(value: str) -> str | None:
    """A phone number in one canonical form (national numbers read as British), or None when it is not one."""
    digits = re.sub(r"\D", "", value)
    if not 7 <= len(digits) <= 15:
        return None
    try:
        number = phonenumbers.parse(value, "GB")
    except phonenumbers.NumberParseException:
        return None
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
