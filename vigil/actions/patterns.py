"""Risk patterns as data: the chains of allowed actions that together reach a forbidden goal (``risk.yaml``).

A pattern is either a chain of ``steps`` or an ``aggregate``, within ``window_s`` of the proposed action, over one
case or over the customer's cases (``scope``)::

    - name: cancel_then_refund
      description: An order cancelled with its payment returned, and refunded as well.
      window_s: 2592000
      scope: customer
      order: any                      # "sequence" (the default): steps happen in the order written
      steps:
        - action: cancel_order
          where: {facts.refunds_payment: true, arguments.order_id: $order}
        - action: refund_order
          where: {arguments.order_id: $order}

    - name: refund_splitting
      ...
      aggregate:
        action: refund_order
        where: {arguments.order_id: $order}     # the records counted share the proposed one's order
        count: {gte: 3}
        sum: {of: arguments.amount_cents, gt: 15000}

``where`` maps a field (``name``, ``conversation_id``, ``customer_id``, ``tenant``, ``status``, ``at``, or a
dotted path under ``arguments.`` or ``facts.``) to a literal (equal to it), a list (one of them), ``$var``, or one
operator: ``eq``, ``ne``, ``in``, ``not_in``, ``gt``, ``gte``, ``lt``, ``lte``, ``exists`` (true/false) and
``age_under_s`` (the field is a time less than N seconds before the record's own ``at``). A ``$var`` is bound by
the first record that reaches it through equality and must be equal everywhere else; an operator may compare with a
``$var`` bound elsewhere in the pattern. In an aggregate, the proposed action binds the variables. Every problem is a
``RiskPatternError`` naming the file, the pattern and the field, and nothing of a bad file is loaded.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from vigil.core.errors import RulebookError

Scalar = str | int | float | bool | None
OPERATORS = ("eq", "ne", "in", "not_in", "gt", "gte", "lt", "lte", "exists", "age_under_s")
RECORD_FIELDS = ("name", "conversation_id", "customer_id", "tenant", "status", "at")
_VAR = re.compile(r"^\$[A-Za-z_][A-Za-z0-9_]*$")
_PATH = re.compile(r"^(?:(?:arguments|facts)(?:\.[A-Za-z0-9_-]+)+|" + "|".join(RECORD_FIELDS) + ")$")
Name = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]


class RiskPatternError(RulebookError):
    """A risk pattern file that cannot be loaded; the message names the file, the pattern and the field."""

    def __init__(self, path: Path | str, problem: str, pattern: str | None = None, at: str | None = None) -> None:
        where = f"{path}" + (f": pattern {pattern!r}" if pattern else "") + (f": {at}" if at else "")
        super().__init__(f"{where}: {problem}")
        self.path = path
        self.pattern = pattern
        self.field = at


@dataclass(frozen=True, slots=True)
class Test:
    """One compiled condition: ``path`` (split on dots), the operator and its value (a literal or ``$var``)."""

    path: tuple[str, ...]
    op: str
    value: Any

    @property
    def var(self) -> str | None:
        """The variable the value names, if any (without the ``$``)."""
        return self.value[1:] if isinstance(self.value, str) and _VAR.match(self.value) else None

    @property
    def binds(self) -> bool:
        """Whether the condition can bind its variable (equality)."""
        return self.op == "eq" and self.var is not None


def compile_where(where: dict[str, Any]) -> tuple[Test, ...]:
    tests = []
    for path, condition in where.items():
        if not _PATH.match(path):
            raise ValueError(f"{path!r}: not a field (one of {', '.join(RECORD_FIELDS)}, arguments.X or facts.X)")
        op, value = _operator(path, condition)
        tests.append(Test(tuple(path.split(".")), op, value))
    return tuple(tests)


def _operator(path: str, condition: Any) -> tuple[str, Any]:
    if isinstance(condition, list):
        return "in", condition
    if not isinstance(condition, dict):
        return "eq", condition
    if len(condition) != 1:
        raise ValueError(f"{path!r}: give one operator, not {sorted(condition)}")
    ((op, value),) = condition.items()
    if op not in OPERATORS:
        raise ValueError(f"{path!r}: unknown operator {op!r} (one of {', '.join(OPERATORS)})")
    if op in ("in", "not_in") and not isinstance(value, list):
        raise ValueError(f"{path!r}: {op} takes a list")
    if op == "exists" and not isinstance(value, bool):
        raise ValueError(f"{path!r}: exists takes true or false")
    if op in ("gt", "gte", "lt", "lte", "age_under_s") and not _number_or_var(value):
        raise ValueError(f"{path!r}: {op} takes a number or a $variable")
    return op, value


def _number_or_var(value: Any) -> bool:
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    return is_number or (isinstance(value, str) and _VAR.match(value) is not None)


def _valid_where(where: dict[str, Any]) -> dict[str, Any]:
    compile_where(where)
    return where


Actions = Annotated[tuple[Name, ...], BeforeValidator(lambda v: (v,) if isinstance(v, str) else v), Field(min_length=1)]
Where = Annotated[dict[str, Any], AfterValidator(_valid_where)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Step(_Model):
    """One step of a chain: an action (or one of several) and conditions on it."""

    action: Actions
    where: Where = Field(default_factory=dict)

    @property
    def tests(self) -> tuple[Test, ...]:
        """The conditions, compiled."""
        return compile_where(self.where)


class Threshold(_Model):
    """A bound a count or a sum must pass: ``gt`` or ``gte`` a number or a ``$var``."""

    of: str | None = None
    gt: float | str | None = None
    gte: float | str | None = None

    @model_validator(mode="after")
    def _one_bound(self) -> Threshold:
        bounds = [b for b in (self.gt, self.gte) if b is not None]
        if len(bounds) != 1:
            raise ValueError("give exactly one of gt, gte")
        if not _number_or_var(bounds[0]):
            raise ValueError("a bound is a number or a $variable")
        if self.of is not None and not _PATH.match(self.of):
            raise ValueError(f"of: {self.of!r} is not a field")
        return self


class Aggregate(_Model):
    """Records of ``action`` meeting ``where`` within the window, counted (``count``, of ``distinct`` values of a
    field when given) and/or summed (``sum``); every threshold given must be passed."""

    action: Actions
    where: Where = Field(default_factory=dict)
    distinct: str | None = None
    count: Threshold | None = None
    sum: Threshold | None = None

    @model_validator(mode="after")
    def _thresholds(self) -> Aggregate:
        if self.count is None and self.sum is None:
            raise ValueError("an aggregate needs count, sum or both")
        if self.count is not None and self.count.of is not None:
            raise ValueError("count takes no 'of'")
        if self.sum is not None and self.sum.of is None:
            raise ValueError("sum needs 'of', the field summed")
        if self.distinct is not None and not _PATH.match(self.distinct):
            raise ValueError(f"distinct: {self.distinct!r} is not a field")
        return self

    @property
    def tests(self) -> tuple[Test, ...]:
        """The conditions, compiled."""
        return compile_where(self.where)


class Pattern(_Model):
    """A forbidden goal reached through allowed actions."""

    name: Name
    description: str = Field(min_length=10, max_length=400)
    window_s: float = Field(gt=0)
    scope: Literal["case", "customer"]
    order: Literal["sequence", "any"] = "sequence"
    steps: tuple[Step, ...] | None = Field(default=None, min_length=2)
    aggregate: Aggregate | None = None

    @model_validator(mode="after")
    def _shape(self) -> Pattern:
        if (self.steps is None) == (self.aggregate is None):
            raise ValueError("give either steps or aggregate")
        self._check_variables()
        return self

    def _check_variables(self) -> None:
        tests = [t for step in self.steps or () for t in step.tests]
        if self.aggregate is not None:
            tests = list(self.aggregate.tests)
            bounds = [self.aggregate.count, self.aggregate.sum]
            tests += [Test((), "gt", b.gt if b.gt is not None else b.gte) for b in bounds if b is not None]
        bound = {t.var for t in tests if t.binds}
        unbound = sorted({t.var for t in tests if t.var is not None} - bound)
        if unbound:
            raise ValueError(f"${unbound[0]} is compared but never bound by equality (field: $var)")

    @property
    def actions(self) -> frozenset[str]:
        """Every action name the pattern mentions."""
        groups = [s.action for s in self.steps] if self.steps else [self.aggregate.action] if self.aggregate else []
        return frozenset(name for group in groups for name in group)


class RiskFile(_Model):
    """The file: ``patterns``, a list."""

    patterns: tuple[Pattern, ...]


def load_patterns(path: Path, actions: Collection[str] | None = None) -> tuple[Pattern, ...]:
    """Read and validate ``path``.

    Args:
        path: a YAML file with a top-level ``patterns`` list.
        actions: the catalog's action names; when given, a pattern naming another action is an error.

    Raises:
        RiskPatternError: the file cannot be read, is not YAML, or a pattern is invalid (named with its field).
    """
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise RiskPatternError(path, f"cannot read: {exc}") from exc
    try:
        patterns = RiskFile.model_validate(raw).patterns
    except ValidationError as exc:
        error = exc.errors()[0]
        name, at = _where(raw, error["loc"])
        raise RiskPatternError(path, error["msg"], name, at) from exc
    _check_names(path, patterns, actions)
    return patterns


def _where(raw: Any, loc: tuple[int | str, ...]) -> tuple[str | None, str]:
    """The pattern's name (when the location is inside one) and the field's dotted path within it."""
    if len(loc) >= 2 and loc[0] == "patterns" and isinstance(loc[1], int):
        items = raw.get("patterns") if isinstance(raw, dict) else None
        entry = items[loc[1]] if isinstance(items, list) and loc[1] < len(items) else None
        name = entry.get("name") if isinstance(entry, dict) else None
        return (str(name) if name else f"#{loc[1] + 1}"), ".".join(map(str, loc[2:])) or "(pattern)"
    return None, ".".join(map(str, loc)) or "(file)"


def _check_names(path: Path, patterns: tuple[Pattern, ...], actions: Collection[str] | None) -> None:
    seen: set[str] = set()
    for pattern in patterns:
        if pattern.name in seen:
            raise RiskPatternError(path, "a second pattern has this name", pattern.name, "name")
        seen.add(pattern.name)
        unknown = sorted(pattern.actions - set(actions)) if actions is not None else []
        if unknown:
            raise RiskPatternError(path, f"unknown action {unknown[0]!r}", pattern.name, "action")
