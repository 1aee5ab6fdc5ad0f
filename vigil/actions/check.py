"""``vigil policy check``: decide a file of action requests, one verdict a line, as a support-operations lead does
before changing a rule (what would this rulebook say about last month's actions?): the policy, then the rulebook's
risk patterns (``risk.yaml``) over the lines before.

Input, one JSON object a line (``CheckRequest``: an ``ActionRequest``, and for the risk patterns when it happened,
in which conversation, for which customer)::

    {"action": "refund_order", "args": {"order_id": "ORD-10001", "amount_cents": 1500, ...},
     "context": {"identity_verified": true, "confirmed": true, "customer": {"id": "BW-100001"},
                 "order": {"customer_id": "BW-100001", "status": "delivered", ...}},
     "tenant": "brightwave", "role": "analyst",
     "at": "2026-10-02T09:30:00Z", "conversation_id": "c-81", "customer_id": "BW-100001"}

Output, one JSON object a line, in the same order: ``{"verdict": "allow"|"needs_approval"|"deny"|"blocked",
"rule", "reason", "approver", "separate_from"}``: ``approver`` is the role that must approve a ``needs_approval``
(else null), ``separate_from`` whom the rule keeps from approving it (``proposer``, ``reader``; else empty); a
``blocked`` line completes a risk pattern (``rule``) with earlier lines, which ``reason`` lists. A line that is not
a request is denied under the rule ``invalid_request`` with what is wrong, so the output stays line for line with
the input.

The risk patterns count the lines the policy allowed or held for approval, as the daemon counts the actions it
suggested (a deny or a blocked line is not counted). A line without ``at`` happens when the line before it did (the
first: 1970-01-01T00:00:00Z); without ``customer_id``, its customer is ``context.customer.id`` (a line with
neither is not checked against the patterns, as in the daemon); without ``conversation_id``, each line is a
conversation of its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import AwareDatetime, ValidationError

from vigil.actions import risk
from vigil.actions.history import risk_facts
from vigil.actions.policy import Verdict
from vigil.actions.rulebook import ActionRequest, Rulebook

INVALID_REQUEST = "invalid_request"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class CheckRequest(ActionRequest):
    """A line of ``vigil policy check``'s input: an action request, and what the risk patterns need of it."""

    at: AwareDatetime | None = None
    conversation_id: str | None = None
    customer_id: str | None = None


@dataclass(frozen=True, slots=True)
class Checked:
    """One line's verdict: the policy's, or ``blocked`` by a risk pattern."""

    verdict: str
    rule: str
    reason: str
    approver: str | None = None
    separate_from: tuple[str, ...] = ()

    @classmethod
    def of(cls, verdict: Verdict) -> Checked:
        return cls(verdict.outcome, verdict.rule, verdict.reason, verdict.approver, verdict.separate_from)

    def to_json(self) -> dict[str, str | list[str] | None]:
        """The documented output line: ``{verdict, rule, reason, approver, separate_from}``."""
        return {
            "verdict": self.verdict,
            "rule": self.rule,
            "reason": self.reason,
            "approver": self.approver,
            "separate_from": list(self.separate_from),
        }


def check(rulebook: Rulebook, lines: Iterable[str]) -> Iterator[Checked]:
    """The verdict for each line of ``lines`` (blank lines included, as invalid requests)."""
    history: list[risk.ActionRecord] = []
    at = EPOCH
    for number, line in enumerate(lines, start=1):
        try:
            request = CheckRequest.model_validate_json(line)
        except ValidationError as exc:
            problem = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in problem["loc"]) or "the line"
            yield Checked("deny", INVALID_REQUEST, f"line {number}: {where}: {problem['msg']}")
            continue
        at = request.at or at
        verdict = Checked.of(rulebook.decide(request))
        if rulebook.guard is None or verdict.verdict not in ("allow", "needs_approval"):
            yield verdict
            continue
        record = _record(request, number, at)
        match = rulebook.guard.check(record, history) if record is not None else None
        if match is not None:
            yield Checked("blocked", match.pattern.name, match.explain())
            continue
        if record is not None:
            history.append(record)
        yield verdict


def _record(request: CheckRequest, number: int, at: datetime) -> risk.ActionRecord | None:
    """``request`` as the guard reads it, suggested at ``at``; None if it names no customer."""
    customer = request.customer_id or _customer_of(request.context)
    if customer is None:
        return None
    return risk.ActionRecord(
        action_id=f"line-{number}",
        conversation_id=request.conversation_id or f"line-{number}",
        customer_id=customer,
        tenant=request.tenant,
        name=request.action,
        arguments=request.args,
        status="suggested",
        at=at,
        facts=risk_facts(request.action, request.args, request.context, None),
    )


def _customer_of(context: Mapping[str, Any]) -> str | None:
    customer = context.get("customer")
    found = customer.get("id") if isinstance(customer, Mapping) else None
    return found if isinstance(found, str) else None


def render(checked: Checked) -> str:
    """One output line."""
    return json.dumps(checked.to_json(), ensure_ascii=False)
