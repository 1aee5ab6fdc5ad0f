"""The guard against the case store: a proposed action checked against the same customer's actions, in every
conversation, within the guard's longest window, read from the ``action`` table on the caller's connection.

The caller holds the customer's lock (``vigil.cases.locks``) in that transaction and writes what follows from the
check in it too, so that two proposals or claims for one customer see each other: an action is checked when it is
suggested (``ActionSkill``, before it is stored) and again when it is claimed for execution (``recheck``, from
``Approvals.execute``), against what happened meanwhile.

The guard reads facts in its own terms (``vigil/actions/risk.py``); they are made here from what the systems said
when each action was proposed (its stored ``facts``) and, for an executed action, what the system answered.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.actions import lifecycle, risk
from vigil.actions.facts import GOODWILL_WINDOW
from vigil.actions.lifecycle import Status, Trigger
from vigil.actions.rulebook import ActionRequest, Rulebook
from vigil.cases import actions as stored
from vigil.cases.actions import ActionRecord
from vigil.cases.locks import lock_customer
from vigil.core.faults import fault

VIGIL = "vigil"
"""The actor of the steps the guard takes."""


class StoredGuard:
    """The conjunctive-risk guard of a rulebook, fed from the case store."""

    def __init__(self, guard: risk.Guard) -> None:
        self._guard = guard

    async def check(
        self, conn: AsyncConnection, record: ActionRecord, *, at: datetime | None = None
    ) -> tuple[str, str, str] | None:
        """The first dangerous chain ``record`` completes, as ``(pattern, description, explanation)``; None if it
        completes none (or names no customer, so has no history). ``at`` is when it would happen (by default when
        it was suggested)."""
        if record.customer_id is None:
            return None
        now = at or record.suggested_at
        since = now - timedelta(seconds=self._guard.window_s)
        past = await stored.history(
            conn, record.tenant, record.customer_id, since=since, statuses=risk.COUNTED, excluding=record.action_id
        )
        history = [_past(row) for row in past]
        match = self._guard.check(dataclasses.replace(as_risk(record), at=now), history)
        if match is None:
            return None
        return match.pattern.name, match.pattern.description, match.explain()


async def recheck(
    conn: AsyncConnection, guard: risk.Guard, record: ActionRecord, *, now: datetime
) -> ActionRecord | None:
    """Check an approved action again as it is claimed for execution, in the claim's transaction: take the
    customer's lock, and if running it now would complete a dangerous chain (one completed since it was suggested),
    move it to ``blocked`` with the pattern and append that step, explained, to its audit log. The action as
    blocked, or None to let the claim go on (no chain, no customer, or it is no longer ``approved``).

    Blocked at the claim, a chain's last action is never run, whichever replica or pipeline approved it.
    """
    if record.customer_id is None:
        return None
    await lock_customer(conn, record.tenant, record.customer_id, at=now)
    matched = await StoredGuard(guard).check(conn, record, at=now)
    fault("action.after_recheck")
    if matched is None:
        return None
    pattern, description, explanation = matched
    return await _blocked_at_claim(
        conn, record, now, rule=pattern, reason=description, detail={"pattern": pattern}, explanation=explanation
    )


async def recheck_goodwill(
    conn: AsyncConnection, rulebook: Rulebook, record: ActionRecord, *, now: datetime
) -> ActionRecord | None:
    """Decide an approved goodwill action again as it is claimed, in the claim's transaction under the customer's
    lock, with the goodwill the customer has had since it was suggested (``MAY_HAVE_RUN``: approved, running, in
    doubt or given): two credits each under the monthly cap when suggested, approved together, would give more than
    it. If the rulebook now refuses it, move it to ``blocked`` with the rule and say why in its audit log. The action
    as blocked, or None to let the claim go on."""
    seen = record.facts.get("goodwill")
    if not record.goodwill or record.customer_id is None or not isinstance(seen, Mapping):
        return None
    await lock_customer(conn, record.tenant, record.customer_id, at=now)
    given = await stored.spend(
        conn, record.tenant, since=now - GOODWILL_WINDOW, customer_id=record.customer_id, excluding=record.action_id
    )
    if given == seen.get("last_30_days_cents"):
        return None  # nothing given since it was decided
    context = {k: v for k, v in record.facts.items() if not k.startswith("_")}
    context["goodwill"] = {**seen, "last_30_days_cents": given}
    verdict = rulebook.decide(
        ActionRequest(action=record.name, args=record.arguments, context=context, tenant=record.tenant)
    )
    if verdict.outcome != "deny":
        return None
    explanation = (
        f"The customer has had {given / 100:.2f} in goodwill in the last 30 days since this was suggested "
        f"(it saw {int(seen.get('last_30_days_cents') or 0) / 100:.2f}): {verdict.reason}"
    )
    return await _blocked_at_claim(
        conn,
        record,
        now,
        rule=verdict.rule,
        reason=verdict.reason,
        detail={"rule": verdict.rule},
        explanation=explanation,
    )


async def _blocked_at_claim(
    conn: AsyncConnection,
    record: ActionRecord,
    now: datetime,
    *,
    rule: str,
    reason: str,
    detail: dict[str, Any],
    explanation: str,
) -> ActionRecord | None:
    """Move an approved ``record`` to ``blocked`` by ``rule`` as it is claimed, with the step in its audit log; the
    action as blocked, or None when it was no longer approved."""
    blocked = await stored.move(
        conn,
        record.action_id,
        from_=lifecycle.sources(Trigger.GUARDED, Status.BLOCKED),
        to=Status.BLOCKED,
        verdict="blocked",
        rule=rule,
        reason=reason,
        decided_at=now,
    )
    if blocked is not None:
        step = {**detail, "when": "claim", "explanation": explanation}
        await stored.append(conn, blocked, "blocked", at=now, actor=VIGIL, detail=step)
    return blocked


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
