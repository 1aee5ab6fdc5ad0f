"""The customer's yes to one action: what the analyst must read back, and which yes answers it.

A yes confirms an action when it answers a read-back of that action: the analyst's messages since the customer last
spoke (the analyst's turn) name the action (the rulebook's ``suggest.read_back`` words, "refund", "cancel"), state
its amount as a number (89.99 is 8999 cents; "112.50" does not state 12.50), and state every argument the customer
supplied or vigil chose (the order id, the e-mail, each part of the address), each as a whole word. The yes must come
after the message that asked for the action (or be it), so a yes to an earlier action of the same arguments is not a
yes to a new one. One yes confirms every action read back in that turn, each of them; a yes after a turn that read
back something else confirms nothing. Arguments the systems gave (the payment method an order was paid with) or the
rulebook fixed need not be read back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vigil.actions.catalog import ActionSpec, Catalog
from vigil.actions.reading import Found, Said, cents

STATED = ("message", "budget")
"""Where an argument that must be read back came from: the conversation, or vigil's own choice."""
_NUMBER = re.compile(r"(?<![\w.,-])(\d{1,3}(?:,\d{3})+|\d+)(\.\d{1,2})?(?![\w-]|[.,]\d)")
_EDGE = r"[\w@%+-]"


@dataclass(frozen=True, slots=True)
class ReadBack:
    """What a read-back of one action says: a word naming it, its amount in cents, and the values it states."""

    words: tuple[re.Pattern[str], ...]
    amount_cents: int | None
    values: tuple[str, ...]

    @classmethod
    def of(
        cls,
        catalog: Catalog,
        spec: ActionSpec,
        arguments: Mapping[str, Any],
        provenance: Mapping[str, Mapping[str, Any]],
    ) -> ReadBack:
        """What must be read back of ``spec`` with ``arguments`` (read from ``provenance``'s sources)."""
        amount = arguments.get(spec.amount) if spec.amount else None
        values = tuple(
            part
            for name, value in arguments.items()
            if name != spec.amount and provenance.get(name, {}).get("source") in STATED
            for part in _parts(value)
        )
        return cls(_naming(catalog, spec), amount if isinstance(amount, int) else None, values)

    def said_in(self, text: str) -> bool:
        """Whether ``text`` reads the action back."""
        if self.words and not any(word.search(text) for word in self.words):
            return False
        if self.amount_cents is not None and self.amount_cents not in amounts(text):
            return False
        return all(_named(value, text) for value in self.values)


def confirmed(
    catalog: Catalog,
    transcript: Sequence[Said],
    spec: ActionSpec,
    arguments: Mapping[str, Any],
    provenance: Mapping[str, Mapping[str, Any]],
    asked: str | None = None,
) -> Found | None:
    """The customer's yes to this action: a message matching the rulebook's ``confirmed`` cue, at or after the
    message ``asked`` (the one that asked for the action, when it is known and still in ``transcript``), that answers
    an analyst's turn reading the action back; None if there is none."""
    cue = catalog.facts.get("confirmed")
    if cue is None:
        return None
    wanted = ReadBack.of(catalog, spec, arguments, provenance)
    first = next((i for i, said in enumerate(transcript) if said.message_id == asked), 0)
    for index in range(len(transcript) - 1, first - 1, -1):
        said = transcript[index]
        if said.role in cue.roles and cue.established(said.text) and wanted.said_in(turn(transcript, index)):
            return Found(True, {"source": "message", "message_id": said.message_id, "role": said.role})
    return None


def turn(transcript: Sequence[Said], index: int) -> str:
    """The analyst's messages between the customer's message at ``index`` and the customer's message before it."""
    said: list[str] = []
    for earlier in reversed(transcript[:index]):
        if earlier.role == "customer":
            break
        if earlier.role == "analyst":
            said.append(earlier.text)
    return "\n".join(reversed(said))


def amounts(text: str) -> set[int]:
    """Every number ``text`` states, in cents (89.99, £10, 1,250.00), not digits inside ids or other numbers."""
    return {cents(match.group(0)) for match in _NUMBER.finditer(text)}


def _naming(catalog: Catalog, spec: ActionSpec) -> tuple[re.Pattern[str], ...]:
    """The words that name ``spec`` in a read-back: the rulebook's ``read_back`` patterns, else the words of its
    name (four letters or more) that no other action's name has, else all of them."""
    if spec.suggest is not None and spec.suggest.read_back:
        return tuple(re.compile(pattern) for pattern in spec.suggest.read_back)
    mine = [word for word in spec.name.split("_") if len(word) >= 4]
    others = {word for name in catalog if name != spec.name for word in name.split("_")}
    distinct = [word for word in mine if word not in others] or mine
    return tuple(re.compile(rf"(?i)\b{re.escape(word)}") for word in distinct)


def _parts(value: Any) -> list[str]:
    """How an argument's parts appear when an analyst reads it back."""
    if isinstance(value, Mapping):
        return [part for v in value.values() for part in _parts(v)]
    if isinstance(value, bool) or not isinstance(value, str | int):
        return []
    return [str(value)]


def _named(value: str, text: str) -> bool:
    """Whether ``text`` states ``value`` as a whole (ORD-1000 is not stated by ORD-10001), in any case."""
    return re.search(rf"(?<!{_EDGE}){re.escape(value)}(?!{_EDGE})", text, re.IGNORECASE) is not None
