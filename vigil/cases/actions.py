"""The actions of a case as stored: each suggested action, the transitions of its status, and its audit log.

A transition is one guarded UPDATE (``WHERE status IN (...)``), so two replicas or two clicks can never both move an
action out of the same status: only one approval of an action counts, and only one execution claims it. Every
transition appends its step to the audit log in the same transaction; the log is never updated (the database
refuses it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.cases.tables import ACTION, ACTION_AUDIT
from vigil.db.engine import upsert
from vigil.wire.events import ApproverRole

OPEN = ("suggested",)
"""Statuses an approval or a rejection may move an action out of."""
MAY_HAVE_RUN = ("approved", "executing", "in_doubt", "executed")
"""Statuses of an action that has run, is running, may have run (``in_doubt``: the system's answer was lost) or is
about to: wherever the money may have moved. The goodwill a customer was given and the tenant's spend count them all
(the conjunctive-risk guard counts them and ``suggested``, ``vigil.actions.risk.COUNTED``), so a credit whose write
timed out is not given twice."""
PENDING = ("suggested", "approved", "executing", "in_doubt")
"""Statuses of an action that may still happen."""
DONE = ("executed",)
RANKS: tuple[str, ...] = get_args(ApproverRole)
"""The roles that may decide actions, lowest first (the wire's and the panel's roles)."""

Refusal = Literal["unknown_action", "not_open", "expired", "arguments_changed", "not_permitted", "not_runnable"]


def arguments_hash(name: str, arguments: Mapping[str, Any]) -> str:
    """The SHA-256 of the action and its arguments, as canonical JSON: what an approval is bound to."""
    canonical = json.dumps([name, arguments], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def action_id(conversation_id: str, digest: str) -> str:
    """The action's id: one per conversation, action and arguments."""
    return "act-" + hashlib.sha256(f"{conversation_id}\x00{digest}".encode()).hexdigest()[:24]


@dataclass(slots=True)
class ActionRecord:
    """One stored action (the columns of ``action``)."""

    action_id: str
    conversation_id: str
    tenant: str
    name: str
    arguments: dict[str, Any]
    arguments_hash: str
    verdict: str
    rule: str
    reason: str
    status: str
    suggested_at: datetime
    customer_id: str | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    amount_cents: int | None = None
    goodwill: bool = False
    approver: str | None = None
    suggestion_id: str | None = None
    expires_at: datetime | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None
    executed_at: datetime | None = None
    attempts: int = 0
    result: dict[str, Any] | None = None

    @classmethod
    def of(cls, row: sa.Row[Any]) -> ActionRecord:
        m = row._mapping
        return cls(**{name: m[name] for name in cls.__slots__})


class AuditEntry(BaseModel):
    """One step of an action's life."""

    seq: int
    action_id: str
    at: datetime
    step: str
    actor: str
    role: str | None
    detail: dict[str, Any]


async def insert(conn: AsyncConnection, record: ActionRecord) -> bool:
    """Store a new action; False (and nothing written) when it is already stored."""
    values = {name: getattr(record, name) for name in ActionRecord.__slots__}
    done = await conn.execute(upsert(conn, ACTION).on_conflict_do_nothing().values(values))
    return bool(done.rowcount)


async def get(conn: AsyncConnection, action_id: str) -> ActionRecord | None:
    """One action, or None."""
    row = (await conn.execute(sa.select(ACTION).where(ACTION.c.action_id == action_id))).first()
    return ActionRecord.of(row) if row is not None else None


async def of_conversation(
    conn: AsyncConnection, conversation_id: str, *, statuses: Collection[str] | None = None
) -> list[ActionRecord]:
    """The conversation's actions (of ``statuses``, if given), oldest first."""
    stmt = sa.select(ACTION).where(ACTION.c.conversation_id == conversation_id)
    if statuses is not None:
        stmt = stmt.where(ACTION.c.status.in_(list(statuses)))
    rows = await conn.execute(stmt.order_by(ACTION.c.suggested_at, ACTION.c.action_id))
    return [ActionRecord.of(row) for row in rows]


HISTORY = (
    "action_id", "conversation_id", "customer_id", "tenant", "name", "arguments", "status", "suggested_at", "facts",
    "result",
)  # fmt: skip
"""What ``history`` reads of each action: not its provenance, reasons or decisions (the guard's read is the hot one)."""


async def history(
    conn: AsyncConnection,
    tenant: str,
    customer_id: str,
    *,
    since: datetime,
    statuses: Collection[str],
    excluding: str | None = None,
) -> list[Mapping[str, Any]]:
    """The customer's actions of ``statuses`` in every conversation since ``since`` (but ``excluding``), oldest
    first, each as the columns of ``HISTORY``."""
    stmt = sa.select(*(ACTION.c[name] for name in HISTORY)).where(
        ACTION.c.tenant == tenant,
        ACTION.c.customer_id == customer_id,
        ACTION.c.suggested_at >= since,
        ACTION.c.status.in_(list(statuses)),
    )
    if excluding is not None:
        stmt = stmt.where(ACTION.c.action_id != excluding)
    rows = await conn.execute(stmt.order_by(ACTION.c.suggested_at, ACTION.c.action_id))
    return [dict(row._mapping) for row in rows]


_GIVEN_AT = sa.func.coalesce(ACTION.c.executed_at, ACTION.c.decided_at, ACTION.c.suggested_at)
"""When goodwill counts as given: when it ran, else when it was approved (it is running, in doubt or about to run)."""


def _given(tenant: str, since: datetime) -> list[sa.ColumnElement[bool]]:
    return [
        ACTION.c.tenant == tenant,
        ACTION.c.goodwill.is_(True),
        ACTION.c.status.in_(MAY_HAVE_RUN),
        since <= _GIVEN_AT,
    ]


async def spend(conn: AsyncConnection, tenant: str, *, since: datetime, customer_id: str | None = None) -> int:
    """Goodwill given by ``tenant`` (to one customer, if given) since ``since``, in cents: executed, or approved and
    maybe run (``MAY_HAVE_RUN``)."""
    stmt = sa.select(sa.func.coalesce(sa.func.sum(ACTION.c.amount_cents), 0)).where(*_given(tenant, since))
    if customer_id is not None:
        stmt = stmt.where(ACTION.c.customer_id == customer_id)
    return int((await conn.execute(stmt)).scalar_one())


async def spends(conn: AsyncConnection, tenant: str, *, since: datetime) -> list[tuple[datetime, int]]:
    """Each goodwill payment of ``tenant`` given since ``since`` (``MAY_HAVE_RUN``): when, and how many cents."""
    rows = await conn.execute(sa.select(_GIVEN_AT.label("at"), ACTION.c.amount_cents).where(*_given(tenant, since)))
    return [(row.at, int(row.amount_cents or 0)) for row in rows]


async def move(
    conn: AsyncConnection, action_id: str, *, from_: Collection[str], to: str, **values: Any
) -> ActionRecord | None:
    """Move the action from one of ``from_`` to ``to`` (and set ``values``); the action as it now is, or None when
    it was in no status of ``from_`` (another replica or click got there first, or it never was)."""
    done = await conn.execute(
        sa.update(ACTION)
        .where(ACTION.c.action_id == action_id, ACTION.c.status.in_(list(from_)))
        .values(status=to, **values)
    )
    return await get(conn, action_id) if done.rowcount else None


async def expired(conn: AsyncConnection, now: datetime, *, limit: int = 100) -> list[ActionRecord]:
    """Suggested actions whose time to be approved has passed, oldest first."""
    rows = await conn.execute(
        sa.select(ACTION)
        .where(ACTION.c.status.in_(OPEN), ACTION.c.expires_at.is_not(None), ACTION.c.expires_at <= now)
        .order_by(ACTION.c.expires_at)
        .limit(limit)
    )
    return [ActionRecord.of(row) for row in rows]


async def append(
    conn: AsyncConnection,
    record: ActionRecord,
    step: str,
    *,
    at: datetime,
    actor: str,
    role: str | None = None,
    detail: Mapping[str, Any] | None = None,
) -> None:
    """Append one step of ``record``'s life to the audit log."""
    await conn.execute(
        sa.insert(ACTION_AUDIT).values(
            action_id=record.action_id,
            conversation_id=record.conversation_id,
            tenant=record.tenant,
            at=at,
            step=step,
            actor=actor,
            role=role,
            detail=dict(detail or {}),
        )
    )


async def audit_log(conn: AsyncConnection, conversation_id: str) -> list[AuditEntry]:
    """The conversation's audit log, in the order it was written."""
    rows = await conn.execute(
        sa.select(ACTION_AUDIT).where(ACTION_AUDIT.c.conversation_id == conversation_id).order_by(ACTION_AUDIT.c.seq)
    )
    return [AuditEntry.model_validate(dict(row._mapping)) for row in rows]


def may_approve(role: str | None, needed: str) -> bool:
    """Whether ``role`` is ``needed`` or above (an unknown ``needed`` takes the highest role)."""
    return role in RANKS and RANKS.index(role) >= RANKS.index(needed if needed in RANKS else RANKS[-1])


def refusal(
    record: ActionRecord, *, approve: bool, role: str | None, arguments_hash: str | None, now: datetime
) -> tuple[Refusal, str] | None:
    """Why ``role`` may not approve (or reject) ``record`` now, or None if they may: it is no longer open, it has
    expired, the arguments are not those approved, the role is below the rule's approver, or it may never run."""
    if record.status not in OPEN:
        return "not_open", f"{record.action_id} is {record.status}, not waiting for a decision"
    if record.expires_at is not None and now >= record.expires_at:
        return "expired", f"{record.action_id} expired at {record.expires_at.isoformat()}"
    if arguments_hash is not None and arguments_hash != record.arguments_hash:
        return "arguments_changed", "the arguments are not those suggested; changed arguments are another action"
    if not approve:
        return None if may_approve(role, "analyst") else ("not_permitted", f"{role or 'nobody'} may not decide actions")
    if record.verdict not in ("allow", "needs_approval"):
        return "not_runnable", f"{record.rule}: {record.reason}"
    needed = record.approver if record.verdict == "needs_approval" and record.approver else "analyst"
    if not may_approve(role, needed):
        return (
            "not_permitted",
            f"{record.rule}: a {needed} approves this action, not {role or 'a caller without a role'}",
        )
    return None
