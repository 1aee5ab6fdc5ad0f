"""A rulebook's own test cases (``tests.yaml`` beside its ``policy.cedar``), run by ``vigil policy test`` as OPA's
``opa test`` runs a policy's tests: each case is a request and the verdict the rulebook must give it, so a change
to a rule that breaks what the lead meant fails before it reaches an analyst.

::

    cases:
      - name: a refund to another card is refused
        request:                       # an ActionRequest, as a line of `vigil policy check` takes it
          action: refund_order
          args: {order_id: ORD-10001, amount_cents: 1500, payment_method_id: PM-5002, reason: damaged}
          context: {identity_verified: true, confirmed: true, customer: {id: CUS-1001}, order: {...}}
        expect: {verdict: deny, rule: refund_to_original_payment}
      - name: a large refund waits for a lead
        request: {...}
        expect: {verdict: needs_approval, rule: large_refund_needs_lead, approver: lead}

YAML anchors and merge keys (``<<: *verified``) share a context between cases; ``given:`` (a mapping the cases do
not read) is a place to define them. ``expect.rule`` is a rule's ``@id``
or a verdict the rulebook gives without a rule (``no_permit``, ``unknown_action``, ``invalid_arguments``,
``invalid_context``); a case naming anything else is a mistake in the file, named with its line.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from vigil.actions.policy import NO_PERMIT, RulebookMistake, Verdict
from vigil.actions.rulebook import ActionRequest, Rulebook
from vigil.core.errors import RulebookError
from vigil.wire.events import ApproverRole

TESTS_FILE = "tests.yaml"
WITHOUT_A_RULE = (NO_PERMIT, "unknown_action", "invalid_arguments", "invalid_context")
"""The verdicts a rulebook gives naming no rule of its own."""


class Expected(BaseModel):
    """The verdict a case must get; ``approver``, when given, the role that must approve it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    verdict: Literal["allow", "needs_approval", "deny"]
    rule: Annotated[str, StringConstraints(min_length=1)]
    approver: ApproverRole | None = None


class Case(BaseModel):
    """One request and what the rulebook must say about it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, StringConstraints(min_length=1)]
    request: ActionRequest
    expect: Expected


class _Suite(BaseModel):
    model_config = ConfigDict(extra="forbid")

    given: dict[str, Any] = Field(default_factory=dict, description="What the cases share, as YAML anchors.")
    cases: list[Case] = Field(min_length=1)


@dataclass(frozen=True, slots=True)
class Outcome:
    """A case, where it is in its file, and what the rulebook said."""

    case: Case
    line: int
    verdict: Verdict

    @property
    def passed(self) -> bool:
        expected, got = self.case.expect, self.verdict
        same = (expected.verdict, expected.rule) == (got.outcome, got.rule)
        return same and (expected.approver is None or expected.approver == got.approver)


def load(path: Path, rulebook: Rulebook | None = None) -> list[tuple[int, Case]]:
    """The cases of ``path``, each with its line; with ``rulebook``, each expected rule must be one of its own.

    Raises:
        RulebookError: the file cannot be read, or a case is not one (a ``RulebookMistake`` naming the line).
    """
    try:
        text = path.read_text("utf-8")
        document = yaml.safe_load(text)
        lines = _case_lines(text)
    except (OSError, yaml.YAMLError) as exc:
        raise RulebookError(f"{path}: {exc}") from exc
    try:
        suite = _Suite.model_validate(document if isinstance(document, dict) else {"cases": document})
    except ValidationError as exc:
        problem = exc.errors(include_url=False)[0]
        where = problem["loc"]
        in_case = len(where) > 1 and where[0] == "cases" and isinstance(where[1], int) and where[1] < len(lines)
        line = lines[int(where[1])] if in_case else 0
        field = ".".join(str(p) for p in where[2:]) or ".".join(str(p) for p in where) or "the file"
        raise RulebookMistake(str(path), line, f"{field}: {problem['msg']}") from exc
    cases = list(zip(lines, suite.cases, strict=False))
    if rulebook is not None:
        known = {rule.id for rule in rulebook.policy.rules} | set(WITHOUT_A_RULE)
        for line, case in cases:
            if case.expect.rule not in known:
                raise RulebookMistake(
                    str(path), line, f"case {case.name!r} expects {case.expect.rule!r}, no rule's @id"
                )
    return cases


def run(rulebook: Rulebook, cases: Sequence[tuple[int, Case]]) -> list[Outcome]:
    """Each case decided by ``rulebook``."""
    return [Outcome(case, line, rulebook.decide(case.request)) for line, case in cases]


def unnamed(rulebook: Rulebook, outcomes: Sequence[Outcome]) -> list[str]:
    """The rules no case's verdict named, in file order: what the cases do not show the rulebook doing."""
    named = {outcome.verdict.rule for outcome in outcomes}
    return [rule.id for rule in rulebook.policy.rules if rule.id not in named]


def report(path: Path, rulebook: Rulebook, outcomes: Sequence[Outcome]) -> Iterator[str]:
    """What ``vigil policy test`` prints: a line a case (``PASS`` or ``FAIL``, and for a failure where the case is,
    what it expected and what the rulebook said, and why), then the count and the rules no case named."""
    for outcome in outcomes:
        if outcome.passed:
            yield f"PASS  {outcome.case.name}"
            continue
        expected, got = outcome.case.expect, outcome.verdict
        yield f"FAIL  {outcome.case.name}  ({path}:{outcome.line})"
        yield f"        expected: {_said(expected.verdict, expected.rule, expected.approver)}"
        yield f"        got:      {_said(got.outcome, got.rule, got.approver)}: {got.reason}"
    failed = sum(not outcome.passed for outcome in outcomes)
    yield f"{len(outcomes) - failed} passed, {failed} failed ({rulebook.name}: {len(outcomes)} cases)"
    missing = unnamed(rulebook, outcomes)
    if missing:
        yield f"rules no case names: {', '.join(missing)}"


def _said(verdict: str, rule: str, approver: str | None) -> str:
    return f"{verdict} by {rule}" + (f", a {approver} approves" if approver else "")


def _case_lines(text: str) -> list[int]:
    """The line each case of the file starts at, in order."""
    document = yaml.compose(text)
    if isinstance(document, yaml.MappingNode):
        found = [value for key, value in document.value if key.value == "cases"]
        document = found[0] if found else None
    if not isinstance(document, yaml.SequenceNode):
        return []
    return [int(node.start_mark.line) + 1 for node in document.value]
