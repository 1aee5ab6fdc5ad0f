"""People's names: the ones known to the case, and third parties found by a name list or by what is said around them.

Three sources, strongest first. The names known to the case (message authors: "Daniel Okafor", "priya.k") are
found in any case, in full or by part. A word after a cue that introduces a person ("my landlord Tom Reilly", "ask
for Sarah", "Mr Adebayo", "Thanks Kevin", "the driver was called Gary") is a name unless it is a common word. A
capitalised word in the first-name list is a name unless it is a common word, a day or a month. A name grows over
the capitalised surname-like words that follow it ("Dana Whitaker", "Claire Fitzgerald").

The name lists are Faker's person providers (first and last names of its 80-odd locales, ~30,000 each); its English
word list (~1,000 of the most common words) tells a name that is also a word ("Will", "May", "Hope") from one that is
not. Both load once, from the installed package, with no download.
"""

from __future__ import annotations

import calendar
import functools
import importlib
import pkgutil
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import faker.providers.lorem.en_US
import faker.providers.person

from vigil.mining.pii_patterns import Found

_WORD = re.compile(r"[^\W\d_][\w'\u2019-]*")
_RELATIONS = (
    "landlord|landlady|husband|wife|partner|son|daughter|mum|mom|mother|dad|father|brother|sister|boss|manager"
    "|colleague|friend|neighbour|neighbor|assistant|accountant|bookkeeper|lawyer|solicitor|gp|vet|doctor|developer"
    "|grandson|granddaughter|grandmother|grandfather|nephew|niece|uncle|aunt|engineer|driver|plumber|electrician"
    "|broker|flatmate|roommate|housemate|employee|tenant|cousin|child|children|baby|kid|fiance|fiancee|carer"
    "|technician|agent|advisor|adviser|guy|lady|man|woman|vendor|witness"
)
_CUE = re.compile(
    rf"(?:\b(?:{_RELATIONS})(?:,| is| was| called| named)?"
    r"|\b(?:ask for|speak to|speak with|talk to|talked to|spoke to|spoke with|called|named|name is|name's|names are"
    r"|i'm|i am|this is|it's|mr\.?|mrs\.?|ms\.?|miss|dr\.?|mx\.?|and|hi|hello|hey|dear|thanks|thank you|cheers|morning"
    r"|afternoon|evening|hola|bonjour|merci|buongiorno|grazie|danke|hallo|ol[áa]|obrigad[oa]|sorry|congratulations"
    r"|welcome|regards|love|ta|bye),?)\s+$",
    re.IGNORECASE,
)
# Cues strong enough to take a lowercase word from the name list ("ask for jenny", "my wife roisin").
_STRONG_CUE = re.compile(
    rf"\b(?:(?:{_RELATIONS})(?: is| was| called| named)?"
    r"|ask for|speak to|talk to|called|named|name is|mr|mrs|ms|dr)\s+$",
    re.IGNORECASE,
)
_HANDLE_WORDS = {"guest", "user", "admin", "support", "team", "agent", "bot", "customer", "anon", "anonymous", "info"}
_TITLES = {"mr", "mrs", "ms", "miss", "mx", "dr", "sir", "madam", "prof", "st"}
_LOOKBACK = 30
_CALENDAR = frozenset(
    name.lower()
    for name in (*calendar.day_name, *calendar.month_name, *calendar.day_abbr, *calendar.month_abbr)
    if name
)
# A word from the list alone is a place more often than a person after these, or before a place word.
_PLACE_BEFORE = re.compile(r"(?:\b(?:in|near|via|into|across|around|outside|from)\s+|/)$", re.IGNORECASE)
_PLACE_AFTER = re.compile(
    r"^(?:\s+(?:Street|St|Road|Rd|Avenue|Lane|Square|Park|Station|Airport|Bridge|Hospital|University|College"
    r"|School|Centre|Center|Bank|Mall|city|branch|depot|zone|street|road)\b|/)"
)


@dataclass(frozen=True, slots=True)
class NameLists:
    """First names, surnames and the common words that some names also are, all lowercased."""

    first: frozenset[str]
    last: frozenset[str]
    common: frozenset[str]


@functools.cache
def name_lists() -> NameLists:
    """Faker's first and last names of every locale, and its common English words with days and months."""
    first: set[str] = set()
    last: set[str] = set()
    for module_info in pkgutil.iter_modules(faker.providers.person.__path__):
        provider = getattr(importlib.import_module(f"faker.providers.person.{module_info.name}"), "Provider", None)
        for attribute, target in (
            ("first_names", first),
            ("first_names_male", first),
            ("first_names_female", first),
            ("last_names", last),
        ):
            values = getattr(provider, attribute, None)
            if isinstance(values, dict | list | tuple | set | frozenset):
                target.update(str(value).lower() for value in values)
    common = {word.lower() for word in faker.providers.lorem.en_US.Provider.word_list}
    common |= {name.lower() for name in (*calendar.day_name, *calendar.month_name, *calendar.day_abbr) if name}
    return NameLists(frozenset(first), frozenset(last), frozenset(common))


def known_parts(names: Iterable[str]) -> set[str]:
    """The parts of the case's names worth finding: "Daniel Okafor" -> daniel, okafor; "priya.k" -> priya."""
    parts: set[str] = set()
    for name in names:
        for piece in re.split(r"[\s._\d-]+", name.lower()):
            part = piece.strip("'\u2019")
            if len(part) >= 2 and part not in _HANDLE_WORDS:
                parts.add(part)
    return parts


class NameFinder:
    """Finds people's names in a text; built once, as loading the lists takes a tenth of a second."""

    def __init__(self, lists: NameLists | None = None) -> None:
        self._lists = lists or name_lists()

    def find(self, text: str, known: set[str]) -> Iterator[Found]:
        words = [(match.start(), match.end(), match.group()) for match in _WORD.finditer(text)]
        index = 0
        while index < len(words):
            start, end, word = words[index]
            evidence = self._evidence(text, start, word, known)
            if evidence is None:
                index += 1
                continue
            last = index
            while last + 1 < len(words) and self._continues(text, words[last], words[last + 1], known):
                last += 1
            end = words[last][1]
            index = last + 1
            if evidence == "listed" and (_PLACE_BEFORE.search(text[:start]) or _PLACE_AFTER.match(text[end:])):
                continue
            yield Found(start, end - (2 if text[end - 2 : end] in ("'s", "\u2019s") else 0), "name")

    def _evidence(self, text: str, start: int, word: str, known: set[str]) -> str | None:
        """Why ``word`` starts a name: "known" to the case, "cued" by the words before it, "listed" as a first
        name; or None."""
        bare = _bare(word)
        if len(bare) < 2 or (word.isupper() and len(word) > 1) or bare.rstrip(".") in _TITLES:
            return None
        lists = self._lists
        capitalised = word[0].isupper()
        common = bare in lists.common
        if bare in known:
            return "known" if capitalised or not (common or len(bare) <= 3) else None
        before = text[max(0, start - _LOOKBACK) : start]
        if not capitalised:
            cued = not common and bare in lists.first and _STRONG_CUE.search(before) is not None
            return "cued" if cued else None
        if common:
            return None
        if _CUE.search(before):
            return "cued"
        return "listed" if any(part in lists.first for part in bare.split("-")) else None

    def _continues(
        self, text: str, previous: tuple[int, int, str], word: tuple[int, int, str], known: set[str]
    ) -> bool:
        """Whether ``word`` is the next part of the name that ends with ``previous`` (a surname, a middle name)."""
        between = text[previous[1] : word[0]]
        if between != " ":
            return False
        bare = _bare(word[2])
        if bare in known:
            return True
        if not word[2][0].isupper():
            # "joseph kamau mwangi": a lowercase name goes on after a known one when the lists have the word.
            lists = self._lists
            return (
                _bare(previous[2]) in known and bare not in lists.common and (bare in lists.last or bare in lists.first)
            )
        if word[2].isupper():
            return False
        return bare not in self._lists.common or (bare in self._lists.last and bare not in _CALENDAR)


def _bare(word: str) -> str:
    """The word without a possessive or a contraction's tail: "Agnes's" -> agnes, "I've" -> i."""
    return re.sub(r"['\u2019](?:s|ve|d|m|ll|re|t)$", "", word.lower())
