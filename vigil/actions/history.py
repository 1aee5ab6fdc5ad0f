"""The guard against the case store: a proposed action checked against the same customer's actions, in every
conversation, within the guard's longest window, read from the ``action`` table.

The guard reads facts in its own terms (``vigil/actions/risk.py``); they are made here from what the systems said
when each action was proposed (its stored ``facts``) and, for an executed action, what the system answered.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from vigil.actions import risk
from vigil.cases import actions as stored
from vigil.cases.actions import ActionRecord
from vigil.db.engine import guarded


class StoredGuard:
    """The conjunctive-risk guard of a rulebook, fed from the case store."""

    def __init__(self, guard: risk.Guard, engine: AsyncEngine, *, timeout_s: float | None) -> None:
        self._guard = guard
        self._engine = engine
        self._timeout_s = timeout_s

    async def check(self, record: ActionRecord) -> tuple[str, str, str] | None:
        """The first dangerous chain ``record`` completes, as ``(pattern, description, explanation)``; None if it
        completes none (or names no customer, so has no history)."""
        if record.customer_id is None:
            return None
        since = record.suggested_at - timedelta(seconds=self._guard.window_s)
        async with guarded(self._engine, timeout_s=self._timeout_s, begin=False) as conn:
            past = await stored.history(
                conn, record.tenant, record.customer_id, since=since, statuses=risk.COUNTED, excluding=record.action_id
            )
        history = [_past(row) for row in past]
        match = self._guard.check(as_risk(record), history)
        if match is None:
            return None
        return match.pattern.name, match.pattern.description, match.explain()


def _past(m: Mapping[str, Any]) -> risk.ActionRecord:
    return risk.ActionRecord(
        action_id=m["action_id"],
        conversation_id=m["conversation_id"],
        customer_id=m["customer_id"] or "",
        tenant=m["tenant"],
        name=m["name"],
        arguments=m["arguments"],
        status=m["status"],
        at=m["suggested_at"],
        facts=risk_facts(m["name"], m["arguments"], m["facts"], m["result"]),
    )


def as_risk(record: ActionRecord) -> risk.ActionRecord:
    """``record`` as the guard reads it."""
    return risk.ActionRecord(
        action_id=record.action_id,
        conversation_id=record.conversation_id,
        customer_id=record.customer_id or "",
        tenant=record.tenant,
        name=record.name,
        arguments=record.arguments,
        status=record.status,  # type: ignore[arg-type]
        at=record.suggested_at,
        facts=risk_facts(record.name, record.arguments, record.facts, record.result),
    )


def risk_facts(
    name: str, arguments: Mapping[str, Any], facts: Mapping[str, Any], result: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The facts the risk patterns read, from the facts the policy was given and the system's answer."""
    order: Mapping[str, Any] = facts["order"] if isinstance(facts.get("order"), Mapping) else {}
    account: Mapping[str, Any] = facts["account"] if isinstance(facts.get("account"), Mapping) else {}
    found: dict[str, Any] = {}
    method = arguments.get("payment_method_id")
    if name == "refund_order" and method is not None:
        if order.get("payment_method_id") is not None:
            found["payment_method_original"] = method == order["payment_method_id"]
        for known in account.get("payment_methods") or []:
            if isinstance(known, Mapping) and known.get("id") == method and known.get("added_at"):
                found["payment_method_added_at"] = known["added_at"]
        if order.get("total_cents") is not None:
            found["order_total_cents"] = order["total_cents"]
    if name == "cancel_order" and order.get("payment_method_id") is not None:
        found["refunds_payment"] = True
    if name == "add_payment_method" and result and isinstance(result.get("id"), str):
        found["payment_method_id"] = result["id"]
    return found
