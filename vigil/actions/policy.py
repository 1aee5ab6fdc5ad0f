"""The policy: which actions may run, which wait for a person's approval, and which are forbidden, as Cedar rules.

A rulebook's ``policy.cedar`` is read by a support-operations lead, so each rule says who it is and why it exists in
annotations, and the verdict repeats them:

    @id("refund_over_remaining")
    @reason("A refund cannot exceed what is left to refund on the order.")
    forbid(principal, action == Action::"refund_order", resource)
    when { context.args.amount_cents > context.order.refundable_cents };

    @id("refund_needs_lead")
    @outcome("needs_approval")
    @approver("lead")
    @reason("Refunds move money: a lead approves them.")
    permit(principal, action == Action::"refund_order", resource)
    when { context.identity_verified };

Cedar decides allow or deny; vigil reads three verdicts out of that:
- ``deny``: a ``forbid`` matched, or no ``permit`` did (``no_permit``). Hard rules first: the first forbid in file
  order that is not a precondition of the rulebook names the rule (a precondition waits for the conversation: the
  identity check, the customer's yes), else the first precondition that matched, else a rule that could not be
  evaluated;
- ``needs_approval``: the permits that matched include one marked ``@outcome("needs_approval")`` (its
  ``@approver`` role, ``lead`` by default, must approve);
- ``allow``: otherwise; the analyst's click runs it.

Everything the rules reason about is in the request's context: ``context.args`` are the action's arguments, the
rest are facts (the order as the order system has it, whether the customer's identity was checked...). Money is in
integer cents, as Cedar has no decimals. A rule that cannot be evaluated (a fact it needs is missing) makes the
verdict ``deny`` naming that rule: Cedar would skip it silently, and a skipped ``forbid`` would let the action
through.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import cedarpy

from vigil.actions.rule_text import Mentions, Span, line_in, mentions, spans
from vigil.core.errors import InvalidArguments, RulebookError
from vigil.wire.events import ApproverRole

Outcome = Literal["allow", "needs_approval", "deny"]
NO_PERMIT = "no_permit"
DEFAULT_APPROVER = "lead"
SEPARATE_FROM = ("proposer", "reader")
"""Whom ``@separate_from`` may keep from approving: the analyst who proposed the action (wrote last before it was
suggested) and the one who read it back to the customer."""
ROLES: tuple[str, ...] = get_args(ApproverRole)
"""The roles a request is made in and a rule may name (``Role::"lead"``, ``@approver("lead")``), lowest first."""
ENTITY_TYPES = ("Role", "Action", "Tenant")
"""What a request's principal, action and resource are in Cedar: ``Role::"<role>"``, ``Action::"<action>"``,
``Tenant::"<tenant>"``."""
_EVALUATION_ERROR = re.compile(r"policy `([^`]+)`")


class RulebookMistake(RulebookError):
    """A mistake at a line of a rulebook's file: the message is ``<path>:<line>: <problem>``."""

    def __init__(self, path: str, line: int, problem: str) -> None:
        super().__init__(f"{path}:{line}: {problem}" if line else f"{path}: {problem}")
        self.path = path
        self.line = line
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Rule:
    """One Cedar policy, as its annotations describe it."""

    id: str
    effect: Literal["permit", "forbid"]
    outcome: Outcome
    reason: str
    approver: str | None
    separate_from: tuple[str, ...] = ()
    line: int = 0
    """Where it starts in its file (0: not known)."""
    names: Mentions | None = None
    """What it names: the actions of its scope, roles, tenants, the arguments it reads."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the policy says about one action in its context, and which rule said it."""

    outcome: Outcome
    rule: str
    reason: str
    approver: str | None = None
    """For ``needs_approval``: the role that must approve."""
    separate_from: tuple[str, ...] = ()
    """For ``needs_approval``: who may not approve it (``SEPARATE_FROM``: the analyst who proposed it, the one who
    read it back), whatever their role."""


class Policy:
    """A parsed Cedar policy set, asked once per proposed action."""

    def __init__(
        self, text: str, *, source: str = "policy", schema: str | None = None, schema_source: str = "schema"
    ) -> None:
        """Parse ``text`` and check each rule: its annotations, and that every role, approver and entity type it
        names exists; with ``schema`` (Cedar's schema language), that the rules fit it (Cedar's validator: every
        fact and argument they read is declared, with the type they use it as).

        Raises:
            RulebookError: the text is not Cedar, or ``schema`` cannot be read.
            RulebookMistake: a rule that is wrong, at its line.
        """
        try:
            self._policies = cedarpy.PolicySet.from_str(text)
            parsed = json.loads(cedarpy.policies_to_json_str(text))
        except ValueError as exc:
            raise RulebookError(f"{source}: not a valid Cedar policy: {exc}") from exc
        policies = parsed["staticPolicies"]
        self.rules = _rules(policies, source, text, spans(text, len(policies)))
        self.actions = frozenset(_actions_named(policies))
        """The actions the rules' scopes name (a rule on an action no catalog has would never match)."""
        self._by_cedar_id = dict(zip(policies, self.rules, strict=True))
        self._order = {rule.id: position for position, rule in enumerate(self.rules)}
        self._entities = cedarpy.Entities.from_json_str("[]")
        if schema is not None:
            self._fit(text, schema, source, schema_source)

    def _fit(self, text: str, schema: str, source: str, schema_source: str) -> None:
        try:
            cedarpy.Schema.from_str(schema)
        except ValueError as exc:
            raise RulebookError(f"{schema_source}: not a Cedar schema: {exc}") from exc
        result = cedarpy.validate_policies(text, schema)
        if result.validation_passed:
            return
        error = result.errors[0]
        rule = self._by_cedar_id.get(error.policy_id)
        problem = error.error.replace(f"for policy `{error.policy_id}`", "").lstrip(" ,:")
        if rule is None:
            raise RulebookError(f"{source}: the rules do not fit {schema_source}: {problem}")
        raise RulebookMistake(source, rule.line, f"rule {rule.id!r} does not fit {schema_source}: {problem}")

    @classmethod
    def load(cls, path: Path) -> Policy:
        """Read ``path`` (Cedar), and ``policy.cedarschema`` beside it when there is one (the rules are then
        checked against it).

        Raises:
            RulebookError: the file cannot be read, a rule is not Cedar, lacks ``@id`` or ``@reason``, names a
                role, approver or entity type that does not exist, or does not fit the schema (naming its line).
        """
        schema_path = path.with_suffix(".cedarschema")
        try:
            text = path.read_text("utf-8")
            schema = schema_path.read_text("utf-8") if schema_path.is_file() else None
        except OSError as exc:
            raise RulebookError(f"{path}: {exc}") from exc
        return cls(text, source=str(path), schema=schema, schema_source=str(schema_path))

    def decide(
        self,
        action: str,
        context: Mapping[str, Any],
        *,
        tenant: str,
        role: str = "analyst",
        preconditions: Collection[str] = (),
    ) -> Verdict:
        """The verdict on ``action`` with ``context`` (``args`` and facts) for ``tenant``, asked by ``role``.

        Hard rules first: a deny names the first forbid in file order that matched among the rules that are not
        ``preconditions`` (those wait for the conversation: the identity check, the customer's yes), then the first
        precondition that matched, and only then a rule that could not be evaluated (hard rules before
        preconditions again). So an action no conversation can make right is refused at once, by its rule.

        Raises:
            InvalidArguments: ``invalid_context``: a value Cedar cannot hold (a float: use integer cents).
        """
        request = {
            "principal": {"type": "Role", "id": role},
            "action": {"type": "Action", "id": action},
            "resource": {"type": "Tenant", "id": tenant},
            "context": _cedar_values(action, dict(context), "context"),
        }
        result = cedarpy.is_authorized(request, self._policies, self._entities)
        matched = sorted(
            (self._by_cedar_id[cedar_id] for cedar_id in result.diagnostics.reasons), key=lambda r: self._order[r.id]
        )
        forbids = sorted(
            (rule for rule in matched if rule.effect == "forbid"), key=lambda r: r.id in preconditions
        )  # a stable sort: file order within the hard rules, and within the preconditions
        if forbids:
            return Verdict("deny", forbids[0].id, forbids[0].reason)
        if result.diagnostics.errors:
            return self._unevaluated(result.diagnostics.errors, preconditions)
        if result.decision != cedarpy.Decision.Allow:
            return Verdict("deny", NO_PERMIT, f"No rule permits {action} here.")
        held = [rule for rule in matched if rule.outcome == "needs_approval"]
        if not held:
            return Verdict(matched[0].outcome, matched[0].id, matched[0].reason)
        # Every hold that matched applies: the highest approver any of them names (the first such rule is named),
        # and everyone any of them keeps out.
        decisive = max(held, key=lambda rule: _rank(rule.approver))
        separate = tuple(dict.fromkeys(part for rule in held for part in rule.separate_from))
        return Verdict(decisive.outcome, decisive.id, decisive.reason, decisive.approver, separate)

    def _unevaluated(self, errors: Sequence[str], preconditions: Collection[str]) -> Verdict:
        """The deny for the first rule that could not be evaluated: hard rules first, each in file order (an error
        that names no rule first of all)."""

        def rule_of(error: str) -> Rule | None:
            found = _EVALUATION_ERROR.search(error)
            return self._by_cedar_id.get(found.group(1)) if found else None

        def rank(error: str) -> tuple[bool, int]:
            rule = rule_of(error)
            return (False, -1) if rule is None else (rule.id in preconditions, self._order[rule.id])

        error = min(errors, key=rank)
        rule = rule_of(error)
        problem = error.split(": ", 1)[-1]
        name = rule.id if rule else "evaluation_error"
        return Verdict("deny", name, f"The rule could not be checked, so the action is refused: {problem}.")


def _rules(policies: Mapping[str, Any], source: str, text: str, located: list[Span]) -> tuple[Rule, ...]:
    rules: list[Rule] = []
    for (cedar_id, policy), span in zip(policies.items(), located, strict=True):
        rule = _rule(cedar_id, policy, span, source, text)
        if any(seen.id == rule.id for seen in rules):
            raise RulebookMistake(source, span.line, f"rule {rule.id!r}: the @id is used twice")
        rules.append(rule)
    return tuple(rules)


def _rule(cedar_id: str, policy: Mapping[str, Any], span: Span, source: str, text: str) -> Rule:
    """One rule, once its annotations and what it names are right.

    Raises:
        RulebookMistake: they are not (the line of the mistake, else of the rule).
    """
    notes = policy.get("annotations", {})
    rule_id, reason = notes.get("id"), notes.get("reason")

    def wrong(problem: str, needle: str | None = None) -> RulebookMistake:
        line = line_in(text, span, needle) if needle else span.line
        return RulebookMistake(source, line, f"rule {rule_id or cedar_id!r}{problem}")

    if not rule_id or not reason:
        raise wrong(" needs @id and @reason annotations, so a verdict can name it")
    effect = policy["effect"]
    outcome = notes.get("outcome", "deny" if effect == "forbid" else "allow")
    if effect == "forbid" and outcome != "deny":
        raise wrong(": a forbid always denies; it takes no @outcome")
    if effect == "permit" and outcome not in ("allow", "needs_approval"):
        raise wrong(f": @outcome is allow or needs_approval, not {outcome!r}")
    approver = notes.get("approver", DEFAULT_APPROVER) if outcome == "needs_approval" else None
    if "approver" in notes and outcome != "needs_approval":
        raise wrong(': @approver is for a permit with @outcome("needs_approval")', "@approver")
    if approver is not None and approver not in ROLES:
        raise wrong(f": @approver {approver!r} is not a role ({', '.join(ROLES)})", "@approver")
    separate = tuple(part for part in re.split(r"[\s,]+", notes.get("separate_from", "")) if part)
    if separate and outcome != "needs_approval":
        raise wrong(": @separate_from is for a rule that needs an approval", "@separate_from")
    unknown_parts = [part for part in separate if part not in SEPARATE_FROM]
    if unknown_parts:
        names_given = ", ".join(map(repr, unknown_parts))
        raise wrong(f": @separate_from names {names_given}; it takes {', '.join(SEPARATE_FROM)}", "@separate_from")
    names = mentions(policy)
    strange = sorted(names.entity_types - set(ENTITY_TYPES))
    if strange:
        kinds = ", ".join(ENTITY_TYPES)
        raise wrong(f": {strange[0]} is not an entity type a request has ({kinds})", f"{strange[0]}::")
    unknown = sorted(name for kind, name in names.entities if kind == "Role" and name not in ROLES)
    if unknown:
        raise wrong(f": Role::{unknown[0]!r} is not a role ({', '.join(ROLES)})", f'Role::"{unknown[0]}"')
    return Rule(rule_id, effect, outcome, reason, approver, separate, span.line, names)


def _actions_named(policies: Mapping[str, Any]) -> set[str]:
    named: set[str] = set()
    for policy in policies.values():
        scope = policy.get("action", {})
        entities = [scope["entity"]] if "entity" in scope else scope.get("entities", [])
        named.update(entity["id"] for entity in entities if entity.get("type") == "Action")
    return named


def _cedar_values(action: str, value: Any, where: str) -> Any:
    """``value`` as Cedar takes it: no floats (Cedar has none; use cents), no nulls (a missing fact is left out,
    so a rule that needs it cannot be checked and denies)."""
    if isinstance(value, Mapping):
        return {str(k): _cedar_values(action, v, f"{where}.{k}") for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_cedar_values(action, v, f"{where}[{i}]") for i, v in enumerate(value) if v is not None]
    if isinstance(value, float):
        raise InvalidArguments(action, "invalid_context", f"{where} is {value!r}, a decimal; use integer cents")
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        raise InvalidArguments(action, "invalid_context", f"{where} is too large a number")
    return value


def _rank(approver: str | None) -> int:
    """How high an approver role is (an unknown one, which loading refuses, as the highest)."""
    return ROLES.index(approver) if approver in ROLES else len(ROLES)
