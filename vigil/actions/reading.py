"""What the conversation says about an action: whether it calls for one, its arguments and where each came from,
and the facts the conversation establishes (the customer's account, the identity check, the customer's yes).

Customer text is data. Nothing a customer writes can establish the identity check, an approval or a role: those
facts come from the analyst's and the platform's messages, and from message metadata the chat platform sets. An
argument is taken only where its schema's pattern matches exactly, so a look-alike (a Cyrillic capital O in an order id)
is not an order id. Every argument carries its provenance: the message and the words it came from, or the system
and field that said it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vigil.actions.catalog import ActionSpec, Catalog, Source

CUSTOMER_KEY = "customer_id"
"""The message metadata key under which the chat platform names the signed-in customer's account."""
VERIFIED_KEY = "identity_verified"
"""The message metadata key (on the platform's own messages) that says the identity check passed."""

_JOINED = r"\w\-\u00ad\u200b-\u200f\u2060-\u2064\ufeff"
"""What may not touch a value on either side: a letter or digit of any script, a hyphen, or an invisible character
(a zero-width space inside "ORD-320\u200b31" must not leave "ORD-320" standing on its own)."""
_MONEY = re.compile(
    rf"(?:[£$€]\s?(?P<a>\d{{1,6}}(?:[.,]\d{{3}})*(?:\.\d{{1,2}})?)(?![{_JOINED}]))"
    rf"|(?:(?<![{_JOINED}])(?P<b>\d{{1,6}}(?:\.\d{{1,2}})?)\s?(?:pounds|quid|dollars|euros|gbp|usd|eur)\b)",
    re.IGNORECASE,
)
_EMAIL = re.compile(rf"(?<![{_JOINED}.%+])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{{2,}}(?![{_JOINED}])")
_ADDRESS = re.compile(
    r"(?P<line1>\b\d{1,5}[A-Za-z]?\s+[A-Za-z][A-Za-z .'-]{2,60}?),\s*(?:(?P<line2>[A-Za-z][A-Za-z .'-]{2,60}?),\s*)?"
    r"(?P<city>[A-Za-z][A-Za-z .'-]{1,40}?),?\s+(?P<postcode>[A-Z]{1,2}[0-9][A-Z0-9]? ?[0-9][A-Z]{2})\b"
)


@dataclass(frozen=True, slots=True)
class Said:
    """One message as the action skill reads it."""

    message_id: str
    role: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    author: str | None = None
    """Who wrote it (an analyst's id, as the platform names them): whom ``@separate_from`` keeps from approving."""


@dataclass(slots=True)
class Found:
    """An argument's value and where it came from."""

    value: Any
    source: dict[str, Any]


@dataclass(slots=True)
class Reading:
    """An action the conversation calls for: the arguments found, with their provenance, and those missing."""

    spec: ActionSpec
    arguments: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, dict[str, Any]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)


def requested(catalog: Catalog, message: Said) -> list[ActionSpec]:
    """The actions ``message`` (a customer's) calls for, in catalog order."""
    found = []
    for spec in catalog.values():
        cues = spec.suggest
        if cues is None:
            continue
        if any(re.search(p, message.text) for p in cues.when) and not any(
            re.search(p, message.text) for p in cues.unless
        ):
            found.append(spec)
    return found


def customer_of(transcript: Sequence[Said]) -> Found | None:
    """The account the platform says the conversation is with (``metadata.customer_id`` on a customer's or the
    platform's message; the latest wins)."""
    for said in reversed(transcript):
        value = said.metadata.get(CUSTOMER_KEY)
        if said.role in ("customer", "system") and isinstance(value, str) and value:
            return Found(value, {"source": "metadata", "message_id": said.message_id, "field": CUSTOMER_KEY})
    return None


def identity_verified(catalog: Catalog, transcript: Sequence[Said]) -> Found | None:
    """Where the identity check was announced: by the platform (``metadata.identity_verified``) or in the words of
    a role the rulebook trusts with it; None if it was not."""
    cue = catalog.facts.get("identity_verified")
    for said in reversed(transcript):
        if said.role == "system" and said.metadata.get(VERIFIED_KEY) is True:
            return Found(True, {"source": "metadata", "message_id": said.message_id, "field": VERIFIED_KEY})
        if cue and said.role in cue.roles and cue.established(said.text):
            return Found(True, {"source": "message", "message_id": said.message_id, "role": said.role})
    return None


def confirmed(
    catalog: Catalog,
    transcript: Sequence[Said],
    name: str,
    arguments: Mapping[str, Any],
    provenance: Mapping[str, Mapping[str, Any]],
) -> Found | None:
    """The customer's yes to this action: a customer message matching the rulebook's ``confirmed`` cue after the
    analyst's latest message that read the action back; None if there is none.

    A read-back states every amount, and every argument the customer supplied or vigil chose (an address, an
    e-mail, an order id), as the analyst would say it: a yes after only the order was named would confirm any
    amount, and a yes to one address would confirm another. Other arguments the systems gave (the payment method the
    order was paid with) or the rulebook fixed need not be read back. An action with nothing to state (a
    two-factor reset) is read back by naming it ("reset", "factor").
    """
    cue = catalog.facts.get("confirmed")
    if cue is None:
        return None
    stated = [
        shown
        for name, value in arguments.items()
        if provenance.get(name, {}).get("source") in ("message", "budget") or _money(value)
        for shown in _said(value)
    ]
    named = [word for word in name.split("_") if len(word) >= 4]

    def reads_back(text: str) -> bool:
        if stated:
            return all(m in text for m in stated)
        return any(word in text.lower() for word in named)

    read_back = max((i for i, s in enumerate(transcript) if s.role == "analyst" and reads_back(s.text)), default=-1)
    if read_back < 0:
        return None
    for said in transcript[read_back + 1 :]:
        if said.role in cue.roles and cue.established(said.text):
            return Found(True, {"source": "message", "message_id": said.message_id, "role": said.role})
    return None


def _money(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _said(value: Any) -> list[str]:
    """How an argument's parts appear when an analyst reads it back."""
    if isinstance(value, Mapping):
        return [part for v in value.values() for part in _said(v)]
    if isinstance(value, bool) or not isinstance(value, str | int):
        return []
    return [_shown(value)]


def _shown(value: str | int) -> str:
    """How an argument appears when an analyst reads it back (an amount of cents as 12.50)."""
    return f"{value / 100:.2f}" if isinstance(value, int) else value


def read_arguments(
    spec: ActionSpec, transcript: Sequence[Said], facts: Mapping[str, Any], offered: Found | None = None
) -> Reading:
    """The arguments of ``spec`` as its cues say to find them; ``facts`` holds ``customer`` and ``order`` as the
    platform and systems said them, and ``offered`` the concession budget's amount for goodwill."""
    reading = Reading(spec)
    cues = spec.suggest
    if cues is None:
        return reading
    properties = spec.arguments.get("properties", {})
    for name, source in cues.arguments.items():
        found = _first(source, name, properties.get(name, {}), transcript, facts, offered)
        if found is None:
            reading.missing.append(name)
            continue
        reading.arguments[name] = found.value
        reading.provenance[name] = found.source
    return reading


def _first(
    source: Source,
    name: str,
    schema: Mapping[str, Any],
    transcript: Sequence[Said],
    facts: Mapping[str, Any],
    offered: Found | None,
) -> Found | None:
    for one in source if isinstance(source, list) else [source]:
        found = _one(one, name, schema, transcript, facts, offered)
        if found is not None:
            return found
    return None


def _one(
    source: str | dict[str, Any],
    name: str,
    schema: Mapping[str, Any],
    transcript: Sequence[Said],
    facts: Mapping[str, Any],
    offered: Found | None,
) -> Found | None:
    if isinstance(source, dict):
        if "value" in source:
            return Found(source["value"], {"source": "rulebook", "detail": "a fixed value"})
        return _matched(source.get("match", {}), transcript)
    if source == "message":
        return _pattern(schema.get("pattern"), transcript)
    if source == "money":
        return _search(_MONEY, transcript, lambda m: _cents(m.group("a") or m.group("b")))
    if source == "email":
        return _search(_EMAIL, transcript, lambda m: m.group(0))
    if source == "address":
        return _search(_ADDRESS, transcript, _address)
    if source == "budget":
        return offered
    system, _, key = source.partition(".")
    value = facts.get(system, {}).get(key) if isinstance(facts.get(system), Mapping) else None
    if value is None:
        return None
    where = facts.get("_sources", {}).get(system, {"source": system})
    return Found(value, {"field": key, **where})


def _pattern(pattern: str | None, transcript: Sequence[Said]) -> Found | None:
    if not pattern:
        return None
    unanchored = re.compile(rf"(?<![{_JOINED}])(?:{pattern.strip('^$')})(?![{_JOINED}])")
    return _search(unanchored, transcript, lambda m: m.group(0), roles=("customer", "analyst"))


def _matched(choices: Mapping[str, Any], transcript: Sequence[Said]) -> Found | None:
    for said in reversed(transcript):
        if said.role != "customer":
            continue
        for pattern, value in choices.items():
            if re.search(pattern, said.text):
                # The rulebook's reading of the customer's words, not their words: no read-back must quote it.
                return Found(value, {"source": "cue", "message_id": said.message_id, "quote": said.text[:120]})
    return None


def _search(
    pattern: re.Pattern[str], transcript: Sequence[Said], value: Any, roles: tuple[str, ...] = ("customer",)
) -> Found | None:
    """The last match of ``pattern`` in the messages of ``roles``, newest message first."""
    for said in reversed(transcript):
        if said.role not in roles:
            continue
        matches = list(pattern.finditer(said.text))
        if matches:
            match = matches[-1]
            return Found(
                value(match),
                {"source": "message", "message_id": said.message_id, "role": said.role, "quote": match.group(0)},
            )
    return None


def _cents(text: str) -> int:
    whole, _, fraction = text.replace(",", "").partition(".")
    return int(whole) * 100 + int((fraction + "00")[:2])


def _address(match: re.Match[str]) -> dict[str, str]:
    parts = {k: v.strip() for k, v in match.groupdict().items() if v}
    parts["postcode"] = parts["postcode"].upper()
    return parts
