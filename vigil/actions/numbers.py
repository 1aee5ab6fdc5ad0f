"""An action's arguments as the rules read them: each number by the type its schema declares.

JSON has one kind of number and Cedar has none with a fraction, so a number in an argument reaches the rules as:

- an ``integer`` field: a Cedar ``Long`` (``2.0`` is the whole number 2, as JSON Schema says too);
- a ``number`` field: a Cedar ``decimal``, always, so that a rule reads one type whatever the value looks like
  (``context.args.weight_kg.greaterThan(decimal("2.5"))``); Cedar keeps four decimal places, so a fifth is refused;
- the action's money (its ``amount`` argument, ``type: integer``): integer cents only. ``15.5`` or ``1500.0`` is
  refused by ``Catalog.check``, never rounded: money written with a decimal point is likely pounds, not cents.

A number in a field that declares neither type is left as it is, and a decimal there is refused by the policy
(``invalid_context``). The arguments kept on the action, and approved, are those given: only the policy's copy
changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from vigil.actions.catalog import ActionSpec
from vigil.core.errors import InvalidArguments

_PLACES = 4
_LARGEST = Decimal("922337203685477.5807")
"""Cedar's decimal: a 64-bit integer of ten-thousandths."""


def for_rules(spec: ActionSpec, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` (valid for ``spec``'s schema: ``Catalog.check``) with each number as its field's type makes
    it for Cedar.

    Raises:
        InvalidArguments: ``invalid_arguments``: a number Cedar cannot hold.
    """
    return {
        name: _typed(spec, value, _field(spec.arguments, spec.arguments, name), name)
        for name, value in arguments.items()
    }


def _typed(spec: ActionSpec, value: Any, schema: Mapping[str, Any], where: str) -> Any:
    schema = _resolved(spec.arguments, schema)
    if isinstance(value, bool):
        return value
    if isinstance(value, Mapping):
        return {k: _typed(spec, v, _field(spec.arguments, schema, k), f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        items = schema.get("items")
        item = items if isinstance(items, Mapping) else {}
        return [_typed(spec, v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    declared = schema.get("type")
    types = set(declared) if isinstance(declared, list) else {declared}
    if isinstance(value, float) and "integer" in types and value.is_integer():
        return int(value)
    if isinstance(value, int | float) and "number" in types:
        return _decimal(spec, value, where)
    return value


def _decimal(spec: ActionSpec, value: float, where: str) -> dict[str, Any]:
    """``value`` as a Cedar ``decimal`` (its JSON form for a request's context)."""
    number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    exponent = number.as_tuple().exponent
    if isinstance(exponent, int) and -exponent > _PLACES:
        problem = f"has more than {_PLACES} decimal places, which the rules cannot hold"
        raise InvalidArguments(spec.name, "invalid_arguments", f"{where}: {value!r} {problem}")
    if abs(number) > _LARGEST:
        raise InvalidArguments(spec.name, "invalid_arguments", f"{where}: {value!r} is too large a number")
    text = format(number, "f")
    return {"__extn": {"fn": "decimal", "arg": text if "." in text else f"{text}.0"}}


def _field(root: Mapping[str, Any], schema: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """The schema of property ``name`` of the object ``schema`` describes (``{}``: nothing declared)."""
    schema = _resolved(root, schema)
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and isinstance(properties.get(name), Mapping):
        found: Mapping[str, Any] = properties[name]
        return found
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, Mapping) else {}


def _resolved(root: Mapping[str, Any], schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema``, or what its local ``$ref`` (``#/$defs/address``) points at."""
    for _ in range(32):  # a chain of references, never a loop
        ref = schema.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return schema
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        if not isinstance(target, Mapping):
            return {}
        schema = target
    return {}
