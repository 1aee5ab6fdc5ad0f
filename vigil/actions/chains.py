"""Matching one risk pattern: conditions evaluated with variable bindings, chains found by backtracking.

A chain search assigns the proposed action to a step (the last one for ``order: sequence``; any for ``order: any``)
and then the other steps to distinct earlier records, latest first. A condition that compares with a variable not
yet bound waits until it is. Failures are remembered by step, bindings and what constrains the rest, so a history of
thousands of look-alike records costs a scan, not a product of scans.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from vigil.actions.patterns import Pattern, Test, Threshold, compile_where

if TYPE_CHECKING:
    from vigil.actions.risk import ActionRecord

Bindings = dict[str, Any]
Pending = tuple[tuple[int, Test], ...]  # (record index, condition) waiting for a variable; -1 is the proposed one


@dataclass(frozen=True, slots=True)
class Reach:
    """Which history records a pattern may use: from index ``start`` on (the window; records are in time order),
    and only of ``conversation`` when the pattern's scope is the case."""

    start: int
    conversation: str | None


_MISSING = object()


@dataclass(frozen=True, slots=True)
class CompiledStep:
    """A step's actions and conditions: the static ones (no variable) and the rest, binding ones first."""

    actions: frozenset[str]
    static: tuple[Test, ...]
    dynamic: tuple[Test, ...]


@dataclass(frozen=True, slots=True)
class Compiled:
    """A pattern with its conditions compiled."""

    pattern: Pattern
    steps: tuple[CompiledStep, ...]


def compile_pattern(pattern: Pattern) -> Compiled:
    """Split each step's (or the aggregate's) conditions once, at load."""
    wheres = [(s.action, s.where) for s in pattern.steps or ()]
    if pattern.aggregate is not None:
        wheres = [(pattern.aggregate.action, pattern.aggregate.where)]
    steps = []
    for actions, where in wheres:
        tests = compile_where(where)
        dynamic = sorted((t for t in tests if t.var is not None), key=lambda t: not t.binds)
        steps.append(CompiledStep(frozenset(actions), tuple(t for t in tests if t.var is None), tuple(dynamic)))
    return Compiled(pattern, tuple(steps))


def value_of(record: ActionRecord, path: tuple[str, ...]) -> Any:
    """The record's value at ``path``, or ``_MISSING``."""
    head = path[0]
    if head not in ("arguments", "facts"):
        return getattr(record, head)
    current: Any = record.arguments if head == "arguments" else record.facts
    for key in path[1:]:
        if not isinstance(current, Mapping) or key not in current:
            return _MISSING
        current = current[key]
    return current


def holds(test: Test, record: ActionRecord, bindings: Bindings) -> bool | None:
    """Whether ``record`` meets ``test``; None while it compares with an unbound variable. May bind one."""
    actual = value_of(record, test.path)
    if test.op == "exists":
        return (actual is not _MISSING) is bool(test.value)
    if actual is _MISSING:
        return False
    expected, var = test.value, test.var
    if var is not None:
        if var not in bindings:
            if not test.binds:
                return None
            bindings[var] = actual
            return True
        expected = bindings[var]
    return _compare(test.op, actual, expected, record.at)


def _compare(op: str, actual: Any, expected: Any, at: datetime) -> bool:
    try:
        if op == "eq":
            return bool(actual == expected)
        if op == "ne":
            return bool(actual != expected)
        if op in ("in", "not_in"):
            return (actual in expected) is (op == "in")
        if op == "age_under_s":
            when = actual if isinstance(actual, datetime) else datetime.fromisoformat(str(actual))
            return (at - when).total_seconds() < float(expected)
        if isinstance(actual, bool) or not isinstance(actual, int | float):
            return False
        if op == "gt":
            return bool(actual > expected)
        if op == "gte":
            return bool(actual >= expected)
        return bool(actual < expected) if op == "lt" else bool(actual <= expected)
    except (TypeError, ValueError):  # a value of the wrong type, or a time that is not one: no match
        return False


def meets(
    step: CompiledStep, record: ActionRecord, index: int, bindings: Bindings, pending: Pending
) -> tuple[Bindings, list[tuple[int, Test]]] | None:
    """``(bindings, pending)`` after ``record`` takes ``step``, or None when it cannot; waiting conditions that the
    new bindings decide are settled here."""
    if record.name not in step.actions:
        return None
    bindings = dict(bindings)
    waiting = list(pending)
    for test in step.dynamic:
        verdict = holds(test, record, bindings)
        if verdict is False:
            return None
        if verdict is None:
            waiting.append((index, test))
    return bindings, waiting


def settle(
    waiting: list[tuple[int, Test]], records: Sequence[ActionRecord], proposed: ActionRecord, b: Bindings
) -> Pending | None:
    """The conditions still waiting, or None when one now fails."""
    still = []
    for index, test in waiting:
        verdict = holds(test, proposed if index < 0 else records[index], b)
        if verdict is False:
            return None
        if verdict is None:
            still.append((index, test))
    return tuple(still)


def static_ok(step: CompiledStep, record: ActionRecord) -> bool:
    """The step's conditions that need no variable."""
    return record.name in step.actions and all(holds(t, record, {}) for t in step.static)


def candidates(
    step: CompiledStep, records: Sequence[ActionRecord], by_name: Mapping[str, list[int]], reach: Reach
) -> list[int]:
    """Indices of records in reach that meet the step's static conditions, latest first."""
    found = []
    for name in step.actions:
        indices = by_name.get(name, [])
        for i in indices[bisect_left(indices, reach.start) :]:
            record = records[i]
            if reach.conversation is not None and record.conversation_id != reach.conversation:
                continue
            if all(holds(t, record, {}) for t in step.static):
                found.append(i)
    return sorted(found, reverse=True)


def _frozen(bindings: Bindings) -> tuple[tuple[str, Any], ...]:
    try:
        items = tuple(sorted(bindings.items()))
        hash(items)
    except TypeError:  # an unhashable value (an address): its text stands for it
        items = tuple(sorted((k, repr(v)) for k, v in bindings.items()))
    return items


@dataclass(slots=True)
class _Chain:
    """One backtracking search for the steps in ``rest``, given where the proposed action already sits."""

    steps: tuple[CompiledStep, ...]
    cands: list[list[int]]
    rest: list[int]
    records: Sequence[ActionRecord]
    proposed: ActionRecord
    ordered: bool
    later: list[frozenset[int]]
    failed: dict[Any, int]

    def run(
        self, k: int, bound: int, bindings: Bindings, pending: Pending, used: frozenset[int]
    ) -> dict[int, int] | None:
        """Step index -> record index for ``rest[k:]``, or None. In a sequence every record comes before ``bound``."""
        if k == len(self.rest):
            return {} if not pending else None
        key = (k, _frozen(bindings), pending, None if self.ordered else used & self.later[k])
        # A sequence that failed below a bound fails below any smaller one; an unordered search fails again outright.
        if self.failed.get(key, -1) >= (bound if self.ordered else 0):
            return None
        step_index = self.rest[k]
        for index in self.cands[step_index]:
            if (self.ordered and index >= bound) or index in used:
                continue
            state = meets(self.steps[step_index], self.records[index], index, bindings, pending)
            settled = None if state is None else settle(state[1], self.records, self.proposed, state[0])
            if state is None or settled is None:
                continue
            found = self.run(k + 1, index, state[0], settled, used | {index})
            if found is not None:
                found[step_index] = index
                return found
        self.failed[key] = max(self.failed.get(key, -1), bound if self.ordered else 0)
        return None


def search_steps(
    compiled: Compiled,
    proposed: ActionRecord,
    records: Sequence[ActionRecord],
    by_name: Mapping[str, list[int]],
    reach: Reach,
) -> tuple[ActionRecord, ...] | None:
    """The chain ``proposed`` completes (in time order, the proposed one last), or None."""
    steps = compiled.steps
    ordered = compiled.pattern.order == "sequence"
    cands: list[list[int]] | None = None
    for slot in [len(steps) - 1] if ordered else range(len(steps)):
        state = meets(steps[slot], proposed, -1, {}, ()) if static_ok(steps[slot], proposed) else None
        settled = None if state is None else settle(state[1], records, proposed, state[0])
        if state is None or settled is None:
            continue
        cands = cands or [candidates(step, records, by_name, reach) for step in steps]
        rest = [i for i in range(len(steps)) if i != slot]
        if ordered:
            rest.reverse()
        later = [frozenset(i for j in rest[k:] for i in cands[j]) for k in range(len(rest))]
        search = _Chain(steps, cands, rest, records, proposed, ordered, later, {})
        found = search.run(0, len(records), state[0], settled, frozenset())
        if found is not None:
            return (*(records[i] for i in sorted(found.values())), proposed)
    return None


def search_aggregate(
    compiled: Compiled,
    proposed: ActionRecord,
    records: Sequence[ActionRecord],
    by_name: Mapping[str, list[int]],
    reach: Reach,
) -> tuple[tuple[ActionRecord, ...], str] | None:
    """The records counted with ``proposed`` and what they passed, when every threshold is passed; else None."""
    aggregate = compiled.pattern.aggregate
    step = compiled.steps[0]
    state = meets(step, proposed, -1, {}, ()) if static_ok(step, proposed) else None
    if aggregate is None or state is None or settle(state[1], records, proposed, state[0]) is None:
        return None
    bindings = state[0]
    counted = [i for i in candidates(step, records, by_name, reach) if _fits(step, records[i], bindings)]
    members = (*(records[i] for i in sorted(counted)), proposed)
    details: list[str] = []
    if aggregate.count is not None:
        values = [value_of(r, tuple(aggregate.distinct.split("."))) for r in members] if aggregate.distinct else None
        count = len({repr(v) for v in values}) if values is not None else len(members)
        what = f"{count} distinct {aggregate.distinct}" if aggregate.distinct else f"{count} actions"
        if not _passes(count, aggregate.count, bindings, what, details):
            return None
    if aggregate.sum is not None and aggregate.sum.of is not None:
        path = tuple(aggregate.sum.of.split("."))
        total = sum(v for r in members if _number(v := value_of(r, path)))
        if not _passes(total, aggregate.sum, bindings, f"{aggregate.sum.of} totalling {total}", details):
            return None
    return members, "; ".join(details) + f" within {compiled.pattern.window_s / 86400:g} days."


def _fits(step: CompiledStep, record: ActionRecord, bindings: Bindings) -> bool:
    scratch = dict(bindings)
    return all(holds(test, record, scratch) is True for test in step.dynamic)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _passes(value: float, threshold: Threshold, bindings: Bindings, what: str, details: list[str]) -> bool:
    bound: Any = threshold.gt if threshold.gt is not None else threshold.gte
    if isinstance(bound, str):
        bound = bindings.get(bound[1:])
    if not _number(bound):
        return False
    passed = value > bound if threshold.gt is not None else value >= bound
    details.append(f"{what} ({'above' if threshold.gt is not None else 'at least'} {bound:g})")
    return bool(passed)
