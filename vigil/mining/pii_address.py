"""Postal addresses: a street line or a postcode, grown over the address parts written next to it.

An address has two kinds of anchor: a postcode (British, Irish Eircode, US state and ZIP) and a street line (a house
number and a street: "14 Elm Grove", "2 Heol y Nant", "17 rue des Lilas", "ul. Kwiatowa 15"). From an anchor the
span grows over the words that make up an address as people write one: capitalised words, house and flat numbers,
commas ("Flat 3, 27 Harrow Road, London W2 5EH", "The Old Rectory, Church Lane, Little Snoring, Norfolk NR21 0JB"),
and stops at a lowercase word or the end of a sentence. A house number alone ("at no 12") or a town alone is not
redacted: neither points at a person.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from vigil.mining.pii_patterns import Found

_SUFFIXES = (
    "Road|Rd|Street|St|Avenue|Ave|Lane|Ln|Grove|Close|Drive|Dr|Way|Court|Ct|Terrace|Place|Pl|Crescent|Cres|Gardens"
    "|Gdns|Park|Square|Sq|Hill|Row|Mews|Walk|Parade|Boulevard|Blvd|Highway|Hwy|Rise|View|Green|Vale|Wharf|Quay|Yard"
    "|Broadway|Circle|Plaza|Embankment"
)
_PREFIXES = r"rue|avenue|av\.|boulevard|bd|chemin|via|viale|piazza|calle|avenida|plaza|rua|Heol|Ffordd|Stryd"
_WORD = r"[A-ZÀ-Ý][\w'\u2019-]*"
_CONNECTOR = r"(?:y|de|des|du|la|le|del|della|di|van|von|der|upon|on|the|of)"
_STREET = re.compile(
    rf"\b\d{{1,4}}[A-Za-z]?,? (?:{_WORD} |{_CONNECTOR} ){{0,3}}(?:{_SUFFIXES})\b\.?"
    rf"|\b\d{{1,4}}[A-Za-z]?,? (?:{_PREFIXES})(?: (?:{_WORD}|{_CONNECTOR})){{1,3}}"
    rf"|\b(?:ul\.|ulica|rue|via|calle) {_WORD} \d{{1,4}}[a-z]?(?: m\. ?\d+)?"
    rf"|\b[A-ZÄÖÜ][\wäöüß-]*(?:straße|strasse|weg|platz|allee|gasse) \d{{1,4}}[a-z]?"
)
_POSTCODE = re.compile(
    r"\b(?:[A-Z]{1,2}\d[A-Z\d]? \d[A-Z]{2}|[A-Z]{1,2}\d[A-Z\d]?\d[A-Z]{2}"  # UK: LS6 2AB, W2 5EH, B111AN
    r"|(?:[AC-FHKNPRTV-Y]\d{2}|D6W) ?[0-9AC-FHKNPRTV-Y]{4}"  # Eircode: D03 X2K7
    r"|[A-Z]{2} \d{5}(?:-\d{4})?)\b"  # US state and ZIP: CA 94105
)
_EU_POSTCODE = re.compile(r"\d{2}-\d{3}|\d{4,5}")
_UNIT = re.compile(r"(?:Flat|Apartment|Apt\.?|Unit|Suite|Ste\.?|Floor|No\.?)", re.IGNORECASE)
_PART = re.compile(r"[^\s,]+|,")
_ABBREVIATIONS = {"ul.", "Co.", "St.", "Rd.", "Ave.", "m.", "Apt.", "No.", "Ste."}
_MAX_PARTS = 14


def _parts(text: str) -> list[tuple[int, int, str]]:
    return [(match.start(), match.end(), match.group()) for match in _PART.finditer(text)]


def _address_word(word: str) -> bool:
    """A part an address is written with: a capitalised word, a house or flat number, a connector, a comma."""
    if word == "," or word in _ABBREVIATIONS:
        return True
    core = word.rstrip(".!?;:)")
    if not core:
        return False
    if (core[0].isupper() and not core.isupper()) or (len(core) <= 3 and core.isupper()):
        return core.replace("'", "").replace("\u2019", "").replace("-", "").isalnum()
    return bool(re.fullmatch(rf"\d{{1,4}}[A-Za-z]?|{_CONNECTOR}|m\.?", core))


def _ends_sentence(word: str) -> bool:
    return word not in _ABBREVIATIONS and word[-1:] in ".!?;:"


def _grow_left(parts: list[tuple[int, int, str]], index: int) -> int:
    """The index of the first part of the address that ends just before ``parts[index]``."""
    first = index
    for back in range(index - 1, max(-1, index - 1 - _MAX_PARTS), -1):
        word = parts[back][2]
        if not _address_word(word) or _ends_sentence(word):
            break
        first = back
    while first < index and (parts[first][2] == "," or re.fullmatch(_CONNECTOR, parts[first][2])):
        first += 1
    return first


def _grow_right(text: str, parts: list[tuple[int, int, str]], index: int) -> int:
    """The end offset of the address parts that follow ``parts[index]`` (towns, counties, a unit, a postcode)."""
    end = parts[index][1]
    if _ends_sentence(parts[index][2]):
        return end
    limit = min(len(parts), index + 1 + _MAX_PARTS)
    ahead = index + 1
    while ahead < limit:
        start, stop, word = parts[ahead]
        postcode = _POSTCODE.match(text, start)
        if postcode:
            return postcode.end()
        if _EU_POSTCODE.fullmatch(word) and ahead + 1 < len(parts) and _address_word(parts[ahead + 1][2]):
            end = stop
        elif not (_address_word(word) or _UNIT.fullmatch(word)):
            break
        elif word != ",":
            end = stop
        if _ends_sentence(word):
            return start + len(word.rstrip(".!?;:"))
        ahead += 1
    return end


def _part_at(parts: list[tuple[int, int, str]], offset: int) -> int:
    return next(index for index, (start, stop, _) in enumerate(parts) if start <= offset < stop)


def addresses(text: str) -> Iterator[Found]:
    """Postal addresses, from the first part written before an anchor to the last after it."""
    if not any(char.isdigit() for char in text):
        return
    parts = _parts(text)
    for match in _POSTCODE.finditer(text):
        first = _grow_left(parts, _part_at(parts, match.start()))
        yield Found(min(parts[first][0], match.start()), match.end(), "address")
    for match in _STREET.finditer(text):
        index = _part_at(parts, match.start())
        first = index
        # A unit or a house name before the street line: "Flat 3, 27 ...", "Rosewood Court, 2 Mill Lane".
        if index >= 2 and parts[index - 1][2] == ",":
            first = _grow_left(parts, index)
        elif index >= 2 and _UNIT.fullmatch(parts[index - 2][2]):
            first = index - 2
        last = _part_at(parts, match.end() - 1)
        end = max(match.end(), _grow_right(text, parts, last))
        yield Found(parts[first][0], len(text[:end].rstrip(" ,")), "address")
