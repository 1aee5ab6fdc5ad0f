"""The actions a company lets vigil suggest, declared as data (a rulebook's ``actions.yaml``).

Each action has a name, a description an analyst reads, its arguments as a JSON Schema, whether it writes, which
argument (if any) is money it moves, whether it is discretionary goodwill, and the connector call that performs it.
Arguments are checked against the schema before any policy sees them, so a rule never reasons about a malformed
order id or a negative amount.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from vigil.core.errors import InvalidArguments, RulebookError
from vigil.core.money import currency_problem
from vigil.core.settings import checked

Method = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]


class ConnectorCall(BaseModel):
    """The HTTP call that performs an action: which system, the method, the path (``{name}`` takes an argument)
    and the arguments sent in the JSON body."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    system: str
    method: Method = "POST"
    path: str = Field(pattern=r"^/")
    body: tuple[str, ...] = ()


Source = str | list[str | dict[str, Any]] | dict[str, Any]
"""Where a suggested argument comes from (vigil/actions/reading.py): ``message`` (the argument's schema pattern,
found in the conversation), ``money`` (an amount the customer named), ``email``, ``address``, ``customer.<field>``
or ``order.<field>`` (what the systems say), ``budget`` (the concession budget's offer), ``{value: ...}`` (a fixed
value), or a list of those, the first that yields."""


class Cues(BaseModel):
    """When the conversation calls for an action, and where its arguments come from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    when: tuple[str, ...] = Field(min_length=1, description="Patterns on the customer's message that call for it.")
    unless: tuple[str, ...] = Field(default=(), description="Patterns that say it is not called for after all.")
    arguments: dict[str, Source] = Field(default_factory=dict)
    base_cents: int | None = Field(default=None, ge=1, description="Goodwill: what the case merits before budget.")
    title: str = Field(description="The card's title, with {argument} placeholders.")
    read_back: tuple[str, ...] = Field(
        default=(),
        description="Patterns of the analyst's words that name the action when reading it back (one must match); "
        "by default the words of its name that no other action's name has.",
    )

    @model_validator(mode="after")
    def _patterns_compile(self) -> Cues:
        for pattern in (*self.when, *self.unless, *self.read_back):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {pattern!r}: {exc}") from exc
        return self


class FactCue(BaseModel):
    """How a conversation establishes a fact the rules read (``identity_verified``, ``confirmed``): patterns on
    the messages of the roles that may establish it (never the customer's, for what the analyst must check)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    roles: tuple[str, ...]
    when: tuple[str, ...] = Field(min_length=1)
    unless: tuple[str, ...] = Field(
        default=(), description="Patterns of a message that says the words without establishing the fact (a condition)."
    )

    def established(self, text: str) -> bool:
        """Whether ``text`` establishes the fact."""
        return any(re.search(p, text) for p in self.when) and not any(re.search(p, text) for p in self.unless)


class Lookup(BaseModel):
    """A read from a company system that gives the rules a fact (``order``, ``customer``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    system: str
    path: str = Field(pattern=r"^/")
    fields: tuple[str, ...] = Field(min_length=1, description="What the rules may read of the answer.")


class ActionSpec(BaseModel):
    """One action the rulebook knows."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str
    writes: bool = True
    amount: str | None = Field(
        default=None, description="The argument holding the money the action moves, in integer cents."
    )
    goodwill: bool = Field(default=False, description="Discretionary goodwill, kept inside the concession budget.")
    arguments: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    connector: ConnectorCall | None = None
    suggest: Cues | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ActionSpec:
        try:
            Draft202012Validator.check_schema(self.arguments)
        except SchemaError as exc:
            raise ValueError(f"arguments is not a valid JSON Schema: {exc.message}") from exc
        properties = self.arguments.get("properties", {})
        named = [self.amount] if self.amount else []
        if self.connector:
            named += [*self.connector.body, *_placeholders(self.connector.path)]
        unknown = sorted(n for n in named if n not in properties)
        if unknown:
            raise ValueError(f"names arguments its schema does not declare: {', '.join(unknown)}")
        if self.goodwill and not self.amount:
            raise ValueError("a goodwill action needs an amount argument")
        money = properties.get(self.amount) if self.amount else None
        if self.amount and not (isinstance(money, dict) and money.get("type") == "integer"):
            raise ValueError(f"amount {self.amount!r} is money, in integer cents: its schema needs type: integer")
        if self.suggest:
            unknown = sorted(n for n in self.suggest.arguments if n not in properties)
            if unknown:
                raise ValueError(f"suggest names arguments its schema does not declare: {', '.join(unknown)}")
        return self

    @property
    def moves_money(self) -> bool:
        return self.amount is not None


class _Rest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    facts: dict[str, FactCue] = Field(default_factory=dict)
    lookups: dict[str, Lookup] = Field(default_factory=dict)
    preconditions: tuple[str, ...] = ()
    currency: str | None = None

    _a_currency = field_validator("currency")(checked(currency_problem))


def _problem(exc: ValidationError) -> str:
    problem = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in problem["loc"]) or "declaration"
    return f"{where}: {problem['msg']}"


def _placeholders(path: str) -> list[str]:
    return [part[1:-1] for part in path.split("/") if part.startswith("{") and part.endswith("}")]


class Catalog(Mapping[str, ActionSpec]):
    """The actions of one rulebook, by name, with the facts the conversation establishes for its rules, the
    lookups that fetch facts from the systems, and the rules that are preconditions (a verdict by one of those
    waits for the conversation, rather than declining the action)."""

    def __init__(
        self,
        actions: Mapping[str, ActionSpec],
        *,
        facts: Mapping[str, FactCue] | None = None,
        lookups: Mapping[str, Lookup] | None = None,
        preconditions: tuple[str, ...] = (),
        currency: str | None = None,
    ) -> None:
        self._actions = dict(actions)
        self.currency = currency
        """The money the actions move (ISO 4217), as the rulebook names it: how their cards write amounts."""
        self.facts = dict(facts or {})
        self.lookups = dict(lookups or {})
        self.preconditions = frozenset(preconditions)
        self._validators = {
            name: Draft202012Validator(spec.arguments, format_checker=Draft202012Validator.FORMAT_CHECKER)
            for name, spec in actions.items()
        }

    @classmethod
    def load(cls, path: Path) -> Catalog:
        """Read ``actions.yaml``: a mapping ``actions: {name: {description, arguments, ...}}``.

        Raises:
            RulebookError: the file cannot be read, or an action is invalid (naming it and the field).
        """
        try:
            document = yaml.safe_load(path.read_text("utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise RulebookError(f"{path}: {exc}") from exc
        declared = document.get("actions") if isinstance(document, dict) else None
        if not isinstance(declared, dict) or not declared:
            raise RulebookError(f"{path}: expected a mapping `actions:` of action names to their declarations")
        actions = {}
        for name, body in declared.items():
            try:
                actions[name] = ActionSpec.model_validate({**(body or {}), "name": name})
            except ValidationError as exc:
                raise RulebookError(f"{path}: action {name!r}, {_problem(exc)}") from exc
        try:
            rest = _Rest.model_validate({k: v for k, v in document.items() if k != "actions"})
        except ValidationError as exc:
            raise RulebookError(f"{path}: {_problem(exc)}") from exc
        return cls(
            actions, facts=rest.facts, lookups=rest.lookups, preconditions=rest.preconditions, currency=rest.currency
        )

    def check(self, name: str, arguments: Mapping[str, Any]) -> ActionSpec:
        """The action ``name``, once ``arguments`` are valid for it.

        Raises:
            InvalidArguments: the action is unknown, its money is written as a decimal, or an argument breaks its
                schema (the first problem, named).
        """
        spec = self._actions.get(name)
        if spec is None:
            raise InvalidArguments(name, "unknown_action", f"{name!r} is not an action of this rulebook")
        money = arguments.get(spec.amount) if spec.amount else None
        if isinstance(money, float):  # 1500.0 too: money with a decimal point is likely pounds, not cents
            raise InvalidArguments(
                name,
                "invalid_arguments",
                f"{spec.amount}: {money!r} is written as a decimal, but money is a whole number of cents "
                "(write 1550 for 15.50)",
            )
        error = next(iter(sorted(self._validators[name].iter_errors(dict(arguments)), key=str)), None)
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "arguments"
            raise InvalidArguments(name, "invalid_arguments", f"{where}: {error.message}")
        return spec

    def __getitem__(self, name: str) -> ActionSpec:
        return self._actions[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._actions)

    def __len__(self) -> int:
        return len(self._actions)
