"""Personal data with a shape: e-mail addresses, cards, IBANs, IPs, MACs, phone numbers, birth dates, identifiers.

Each finder returns ``Found`` spans over the original text. A shape alone is not enough where a look-alike shares it,
so each finder checks what it can: a card's Luhn digit, an IBAN's mod-97, an IP's octets, a phone number against
Google's libphonenumber metadata (``phonenumbers``), a date against a birth cue or its year. ``look_alikes`` finds the
things that must survive (versions, prices, times, quantities with units, error codes, ordinary dates) so that the
weaker finders (phone, identifier, address, name) give way to them.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from dataclasses import dataclass

import phonenumbers


@dataclass(frozen=True, slots=True)
class Found:
    """A candidate span; ``kind`` is a PII kind, or ``keep`` for a look-alike that must survive."""

    start: int
    end: int
    kind: str


_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_MAC = re.compile(
    r"(?<![\w:-])[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(?:\1[0-9A-Fa-f]{2}){4}(?:\1[0-9A-Fa-f]{2}\1[0-9A-Fa-f]{2})?(?![\w:-])"
    r"|(?<![\w.])[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}(?![\w.])"
)
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{1,4}){3,8}\b")
_CARD = re.compile(r"(?<![\w-])\d(?:[ -]?\d){12,18}(?![\w-])")
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?!\w|\.\d)")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")
_VERSION_CUE = re.compile(
    r"\b(?:firmware|version|ver|v|build|release|kernel)\b(?:\s+(?:is|was|says|shows|now|number))?[\s:]*$", re.IGNORECASE
)
_PHONE = re.compile(r"(?<![\w+])(?:\+|00)?\(?\d[\d ().-]{5,20}\d(?![\w]|[.-]\d)")

_MONTHS = (
    "jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?"
    "|nov(?:ember)?|dec(?:ember)?|janvier|f[ée]vrier|mars|avril|mai|juin|juillet|ao[uû]t|septembre|octobre"
    "|novembre|d[ée]cembre|gennaio|febbraio|marzo|aprile|maggio|giugno|luglio|agosto|settembre|ottobre|dicembre"
    "|enero|febrero|abril|mayo|junio|julio|septiembre|octubre|noviembre|diciembre|januar|februar|m[äa]rz|juni|juli"
    "|oktober|dezember"
)
_DAY = r"(?:[0-3]?\d)(?:st|nd|rd|th)?"
_FULL_DATE = re.compile(
    rf"\b(?:{_DAY}[/.-][01]?\d[/.-](?:19|20)\d\d|(?:19|20)\d\d-[01]\d-[0-3]\d"
    rf"|{_DAY}(?: of)? (?:{_MONTHS}),? (?:19|20)\d\d|(?:{_MONTHS}) {_DAY},? (?:19|20)\d\d)\b",
    re.IGNORECASE,
)
_BIRTH_CUE = re.compile(
    r"\b(?:born|birth|birthday|d\.?o\.?b\.?|n[ée]e?|nat[oa]|geboren)\b[^.!?\n]{0,40}$", re.IGNORECASE
)
# A full date before this year in a support chat is a birth date far more often than anything else; later ones
# need a cue ("born", "date of birth"). A fixed year, not the clock: redaction must give the same answer every day.
_OLD_YEAR = 2010

_ID_CUE = re.compile(
    r"\b(?:account|acct|order|ticket|case|claim|polic(?:y|ies)|reference|ref|booking|tracking|customer|member(?:ship)?"
    r"|serial|passport|licen[cs]e|ssn|social security|reg(?:istration)?|pac|dispute|support|company|ein|tag|flyer"
    r"|meter|file|crime|locker|code|id)\b(?:\s*(?:number|no\.?|num|#|id|is|:|ref|reference|code|was|be))*[\s:#]*$",
    re.IGNORECASE,
)
_TOKEN = re.compile(r"#?[A-Za-z0-9][A-Za-z0-9/-]*[A-Za-z0-9]|#?\d")
_SPACED_ID = re.compile(r"\b(?:[A-Z]{1,4} )?\d{2,6}(?: \d{2,6}){1,4}\b")
_VEHICLE = re.compile(r"\b[A-Z]{2}\d{2} ?[A-Z]{3}\b")

_UNITS = (
    r"(?:[kmgt]?bps|[kmgt]i?b|gb|mb|tb|kwh|w|v|ghz|mhz|hz|%|vcpu|cpus?|cores?|users?|transactions?|parcels?|points?"
    r"|emails?|requests?|days?|hours?|hrs?|minutes?|mins?|seconds?|secs?|weeks?|months?|years?|kg|g|km|miles?|p)(?!\w)"
)
_LOOK_ALIKES = re.compile(
    r"(?:[£$€]|\b(?:EUR|GBP|USD) ?)\d[\d,]*(?:\.\d+)?(?:[km]\b)?"  # prices
    rf"|\b\d[\d,]*(?:\.\d+)?\s?{_UNITS}"  # quantities with units
    r"|\b\d{1,2}[:.]\d{2}(?:\s?(?:am|pm|utc|gmt))?\b|\b\d{1,2}\s?(?:am|pm)\b"  # times
    r"|\bv?\d+(?:\.\d+){1,2}(?:[-.][\w.]+)?\b"  # versions: 22.04, 5.15.0-91-generic, v1.2
    r"|\b(?:build|version|firmware|v)\s*[\d.]+\b"
    r"|\b0x[0-9A-Fa-f]+\b|\b(?:E|ERR|ERROR)[-_ ]?\d{1,4}\b|\bHTTP \d{3}\b"  # error codes
    r"|\b\d{1,2}[/.-]\d{1,2}(?:[/.-]\d{2,4})?\b"  # short or ordinary dates (birth dates win over them)
    r"|\b\d{1,3}(?:,\d{3})+(?:\.\d+)?\b",  # formatted quantities: 12,000
    re.IGNORECASE,
)
_MODEL_CUE = re.compile(r"(?:model|firmware|version|flight|seat|error|plan|chrome|windows|ios|android)\s*$", re.I)

_NATIONAL_REGIONS = ("GB", "IE", "FR", "DE", "ES", "IT", "NL", "PL", "IN", "AU", "NG", "KE", "ZA", "BR", "VN")


def emails(text: str) -> Iterator[Found]:
    """E-mail addresses."""
    for match in _EMAIL.finditer(text):
        yield Found(match.start(), match.end(), "email")


def macs(text: str) -> Iterator[Found]:
    """MAC addresses (six or eight pairs with colons or dashes, or Cisco's three dotted quads)."""
    for match in _MAC.finditer(text):
        yield Found(match.start(), match.end(), "mac")


def _iban_valid(candidate: str) -> bool:
    compact = candidate.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(char, 36)) for char in rearranged)) % 97 == 1


def ibans(text: str) -> Iterator[Found]:
    """IBANs with or without spaces, mod-97 checked; a trailing word swallowed by the pattern is given back."""
    for match in _IBAN.finditer(text):
        candidate = match.group()
        while candidate:
            if _iban_valid(candidate):
                yield Found(match.start(), match.start() + len(candidate), "iban")
                break
            cut = candidate.rfind(" ")
            candidate = candidate[:cut] if cut > 0 else ""


def luhn_valid(digits: str) -> bool:
    """The Luhn check digit of a payment card number."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char) * (2 if index % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def cards(text: str) -> Iterator[Found]:
    """Payment card numbers with spaces, dashes or none: 13-19 digits, a card network's first digit, Luhn-checked."""
    for match in _CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and digits[0] in "23456" and luhn_valid(digits):
            yield Found(match.start(), match.end(), "card")


def ips(text: str) -> Iterator[Found]:
    """IPv4 (each octet at most 255; not a four-part version number after "firmware", "build"...) and IPv6."""
    for match in _IPV4.finditer(text):
        if all(int(part) <= 255 for part in match.group().split(".")) and not _VERSION_CUE.search(
            text[max(0, match.start() - 30) : match.start()]
        ):
            yield Found(match.start(), match.end(), "ip")
    for match in _IPV6.finditer(text):
        candidate = match.group()
        if candidate.count(":") < 2 or not re.search(r"[0-9A-Fa-f]{3}", candidate):
            continue
        try:
            ipaddress.IPv6Address(candidate)
        except ValueError:
            continue
        yield Found(match.start(), match.end(), "ip")


def _is_phone(candidate: str) -> bool:
    digits = re.sub(r"\D", "", candidate)
    if not 7 <= len(digits) <= 15:
        return False
    try:
        if candidate.startswith(("+", "00")):
            number = phonenumbers.parse("+" + digits.removeprefix("00") if candidate.startswith("00") else candidate)
            return phonenumbers.is_possible_number(number)
        if candidate.lstrip("(").startswith("0"):
            for region in _NATIONAL_REGIONS:
                if phonenumbers.is_valid_number(phonenumbers.parse(candidate, region)):
                    return True
            # Ranges kept for fiction (07700 900xxx) are not valid, but a number of their shape is someone's.
            return phonenumbers.is_possible_number(phonenumbers.parse(candidate, "GB"))
        # North American numbers are written grouped ((415) 555-0132, 415-555-0132, 1-415-555-0132).
        if re.fullmatch(r"(?:1[ .-]?)?(?:\(\d{3}\) ?|\d{3}[ .-])\d{3}[ .-]\d{4}", candidate):
            return phonenumbers.is_valid_number(phonenumbers.parse(candidate, "US"))
    except phonenumbers.NumberParseException:
        return False
    return False


def phones(text: str) -> Iterator[Found]:
    """Phone numbers in international and national formats, checked against libphonenumber's metadata."""
    for match in _PHONE.finditer(text):
        candidate = match.group().rstrip(" .-(")
        start = match.start()
        if candidate.startswith("(") and ")" not in candidate:
            candidate, start = candidate[1:], start + 1
        if _is_phone(candidate):
            yield Found(start, start + len(candidate), "phone")


def dates(text: str) -> Iterator[Found]:
    """Full dates: birth dates when a cue is near or the year is old, otherwise look-alikes to keep."""
    for match in _FULL_DATE.finditer(text):
        year = int(re.findall(r"(?:19|20)\d\d", match.group())[-1])
        cue = _BIRTH_CUE.search(text[max(0, match.start() - 60) : match.start()])
        kind = "birth_date" if cue or year < _OLD_YEAR else "keep"
        yield Found(match.start(), match.end(), kind)


def _id_shaped(token: str) -> bool:
    core = token.lstrip("#")
    digits = sum(char.isdigit() for char in core)
    letters = sum(char.isalpha() for char in core)
    if digits >= 5:
        return True
    if len(core) < 6 or digits < 1 or letters < 2 or any(char.islower() for char in core):
        return False
    # Short codes of letters and a few digits (NW-503, 1099-NEC) are error codes and model numbers more often.
    return not re.fullmatch(r"[A-Z]{1,4}-\d{1,4}|\d{1,4}-[A-Z]{1,4}", core)


def identifiers(text: str) -> Iterator[Found]:
    """Account, order, ticket... numbers: a token with a digit after a cue, or one shaped like an identifier."""
    for match in _TOKEN.finditer(text):
        token = match.group()
        if not any(char.isdigit() for char in token):
            continue
        before = text[max(0, match.start() - 40) : match.start()]
        cued = _ID_CUE.search(before) is not None and len(token.lstrip("#")) >= 4
        if (cued or _id_shaped(token)) and not _MODEL_CUE.search(before):
            yield Found(match.start(), match.end(), "identifier")
    for match in _SPACED_ID.finditer(text):
        if _ID_CUE.search(text[max(0, match.start() - 40) : match.start()]):
            yield Found(match.start(), match.end(), "identifier")
    for match in _VEHICLE.finditer(text):
        yield Found(match.start(), match.end(), "identifier")


def look_alikes(text: str) -> Iterator[Found]:
    """Versions, prices, times, quantities, error codes, short dates, and model numbers named as such."""
    for match in _LOOK_ALIKES.finditer(text):
        yield Found(match.start(), match.end(), "keep")
    for match in _TOKEN.finditer(text):
        if _MODEL_CUE.search(text[max(0, match.start() - 20) : match.start()]):
            yield Found(match.start(), match.end(), "keep")
