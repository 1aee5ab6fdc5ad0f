"""What the conversation says about an action: whether it calls for one, its arguments and where each came from,
and the facts the conversation establishes (the customer's account, the identity check).

Customer text is data. Nothing a customer writes can establish the identity check, an approval or a role: those
facts come from the analyst's and the platform's messages, and from message metadata the chat platform sets. Every
message is read as the analyst sees it (``vigil.actions.disguise``: invisible characters removed, full-width and
look-alike letters folded), and remembers what had to be undone: an action read from a disguised message says so.
An argument is taken only where its schema's pattern matches exactly, so an id that still looks wrong once unmasked
(an ASCII O among its digits) is no id. Every argument carries its provenance: the message and the words it came
from, or the system and field that said it. The amount a customer asks for is every amount their message names,
added up: a refund asked for in parts is one request for the total.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vigil.actions.catalog import ActionSpec, Catalog, Source
from vigil.actions.disguise import unmask

CUSTOMER_KEY = "customer_id"
"""The message metadata key under which the chat platform names the signed-in customer's account."""
VERIFIED_KEY = "identity_verified"
"""The message metadata key (on the platform's own messages) that says the identity check passed."""

_JOINED = r"\w\-\u00ad\u200b-\u200f\u2060-\u2064\ufeff"
"""What may not touch a value on either side: a letter or digit of any script, a hyphen, or an invisible character
(a zero-width space inside "ORD-320\u200b31" must not leave "ORD-320" standing on its own)."""
_MONEY = re.compile(
    rf"(?:[£$€]\s?(?P<a>\d{{1,6}}(?:[.,]\d{{3}})*(?:\.\d{{1,2}})?)(?![{_JOINED}]))"
    rf"|(?:(?<![{_JOINED}])(?P<b>\d{{1,6}}(?:\.\d{{1,2}})?)\s?(?:pounds|quid|dollars|euros|gbp|usd|eur)\b)"
    rf"|(?:(?<![{_JOINED}.,£$€])(?P<c>\d{{1,6}}\.\d{{2}})(?![{_JOINED}]|[.,]\d))",
    re.IGNORECASE,
)
"""An amount of money: after a currency sign, before a currency word, or written with pence (89.99)."""
_EMAIL = re.compile(rf"(?<![{_JOINED}.%+])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{{2,}}(?![{_JOINED}])")
_ADDRESS = re.compile(
    r"(?P<line1>\b\d{1,5}[A-Za-z]?\s+[A-Za-z][A-Za-z .'-]{2,60}?),\s*(?:(?P<line2>[A-Za-z][A-Za-z .'-]{2,60}?),\s*)?"
    r"(?P<city>[A-Za-z][A-Za-z .'-]{1,40}?),?\s+(?P<postcode>[A-Z]{1,2}[0-9][A-Z0-9]? ?[0-9][A-Z]{2})\b"
)


@dataclass(frozen=True, slots=True)
class Said:
    """One message as the action skill reads it: ``text`` as the analyst sees it (given as sent, kept unmasked), and
    ``disguise``, what had to be undone to read it so (empty for plain text)."""

    message_id: str
    role: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    author: str | None = None
    """Who wrote it (an analyst's id, as the platform names them): whom ``@separate_from`` keeps from approving."""
    disguise: tuple[str, ...] = field(default=(), init=False)

    def __post_init__(self) -> None:
        unmasked = unmask(self.text)
        object.__setattr__(self, "text", unmasked.text)
        object.__setattr__(self, "disguise", unmasked.disguise)


@dataclass(slots=True)
class Found:
    """An argument's value and where it came from."""

    value: Any
    source: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Request:
    """The customer's message that asked for an action, and what disguised the messages it was read from (the
    request and each argument's message); kept with the action's facts under ``REQUEST_KEY``."""

    message_id: str | None = None
    disguise: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"message_id": self.message_id, "disguise": list(self.disguise)}

    @classmethod
    def from_json(cls, value: Any) -> Request:
        """The request as kept; an action stored before requests were kept has none (no message, no disguise)."""
        if not isinstance(value, Mapping):
            return cls()
        return cls(value.get("message_id"), tuple(value.get("disguise") or ()))


REQUEST_KEY = "_request"
"""Where an action's facts keep its ``Request`` (a key the policy is not shown)."""


@dataclass(slots=True)
class Reading:
    """An action the conversation calls for: the arguments found, with their provenance, those missing, and the
    request they were read for."""

    spec: ActionSpec
    arguments: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, dict[str, Any]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    request: Request = field(default_factory=Request)


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


def read_arguments(
    spec: ActionSpec,
    transcript: Sequence[Said],
    facts: Mapping[str, Any],
    offered: Found | None = None,
    asked: str | None = None,
) -> Reading:
    """The arguments of ``spec`` as its cues say to find them; ``facts`` holds ``customer`` and ``order`` as the
    platform and systems said them, ``offered`` the concession budget's amount for goodwill, and ``asked`` the id
    of the message that asked for the action."""
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
    reading.request = _request(transcript, asked, reading.provenance)
    return reading


def _request(transcript: Sequence[Said], asked: str | None, provenance: Mapping[str, Mapping[str, Any]]) -> Request:
    """The request, disguised if the message that asked for it or any argument's message was."""
    found: dict[str, None] = {}
    for said in transcript:
        if said.message_id == asked:
            found.update(dict.fromkeys(said.disguise))
    for source in provenance.values():
        found.update(dict.fromkeys(source.get("disguise", ())))
    return Request(asked, tuple(found))


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
        return _asked_for(transcript)
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
                source = {"source": "cue", "message_id": said.message_id, "quote": said.text[:120]}
                return Found(value, {**source, **({"disguise": list(said.disguise)} if said.disguise else {})})
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
            return Found(value(match), _from(said, match.group(0)))
    return None


def _asked_for(transcript: Sequence[Said]) -> Found | None:
    """The money the customer's newest message naming any asks for: every amount it names, added up. A refund asked
    for in parts ("£40 for the cable and £45 for the case") is one request for the total, which is what the rules
    must see; an amount named only in passing is added too, so the total is never less than what was asked."""
    for said in reversed(transcript):
        if said.role != "customer":
            continue
        parts = [(m.group(0), cents(m.group("a") or m.group("b") or m.group("c"))) for m in _MONEY.finditer(said.text)]
        if not parts:
            continue
        source = _from(said, " + ".join(quote for quote, _ in parts))
        if len(parts) > 1:
            source["parts"] = [{"quote": quote, "cents": amount} for quote, amount in parts]
        return Found(sum(amount for _, amount in parts), source)
    return None


def _from(said: Said, quote: str) -> dict[str, Any]:
    """The provenance of a value quoted from ``said``, with what disguised the message, if anything did."""
    source: dict[str, Any] = {"source": "message", "message_id": said.message_id, "role": said.role, "quote": quote}
    if said.disguise:
        source["disguise"] = list(said.disguise)
    return source


def cents(text: str) -> int:
    """An amount as written (89.99, 1,500, 12.5) in integer cents."""
    whole, _, fraction = text.replace(",", "").partition(".")
    return int(whole) * 100 + int((fraction + "00")[:2])


def _address(match: re.Match[str]) -> dict[str, str]:
    parts = {k: v.strip() for k, v in match.groupdict().items() if v}
    parts["postcode"] = parts["postcode"].upper()
    return parts
