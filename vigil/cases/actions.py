"""The actions of a case as stored: each suggested action, the transitions of its status, and its audit log.

The store only persists moves; which moves there are, and who may make them, is ``vigil.actions.lifecycle``. A
move is one guarded UPDATE (``WHERE status IN (...)``), so two replicas or two clicks can never both move an action
out of the same status: only one approval of an action counts, and only one execution claims it. Every move appends
its step to the audit log in the same transaction; the log is never updated (the database refuses it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.cases.tables import ACTION, ACTION_AUDIT, SUGGESTION
from vigil.db.engine import upsert

MAY_HAVE_RUN = ("approved", "executing", "in_doubt", "executed")
"""Statuses of an action that has run, is running, may have run (``in_doubt``: the system's answer was lost) or is
about to: wherever the money may have moved. The goodwill a customer was given and the tenant's spend count them all
(the conjunctive-risk guard counts them and ``suggested``, ``vigil.actions.risk.COUNTED``), so a credit whose write
timed out is not given twice."""
PENDING = ("suggested", "approved", "executing", "in_doubt")
"""Statuses of an action that may still happen."""
DONE = ("executed",)


def arguments_hash(name: str, arguments: Mapping[str, Any]) -> str:
    """The SHA-256 of the action and its arguments, as canonical JSON: what an approval is bound to."""
    canonical = json.dumps([name, arguments], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def action_id(conversation_id: str, digest: str, origin: str) -> str:
    """The action's id: one per conversation, action and arguments, and the event that asked for it (``origin``):
    a skill retried on the same event finds the action it stored, and the same request asked again later, once
    the first is over, is a new action with its own id (and its own idempotency key on the company's systems)."""
    key = f"{conversation_id}\x00{digest}\x00{origin}"
    return "act-" + hashlib.sha256(key.encode()).hexdigest()[:24]


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
    claimed_at: datetime | None = None
    separate_from: list[str] | None = None

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


async def spend(
    conn: AsyncConnection,
    tenant: str,
    *,
    since: datetime,
    customer_id: str | None = None,
    excluding: str | None = None,
) -> int:
    """Goodwill given by ``tenant`` (to one customer, if given) since ``since``, in cents: executed, or approved and
    maybe run (``MAY_HAVE_RUN``); without the action ``excluding`` (the one being decided)."""
    stmt = sa.select(sa.func.coalesce(sa.func.sum(ACTION.c.amount_cents), 0)).where(*_given(tenant, since))
    if customer_id is not None:
        stmt = stmt.where(ACTION.c.customer_id == customer_id)
    if excluding is not None:
        stmt = stmt.where(ACTION.c.action_id != excluding)
    return int((await conn.execute(stmt)).scalar_one())


async def spends(conn: AsyncConnection, tenant: str, *, since: datetime) -> list[tuple[datetime, int]]:
    """Each goodwill payment of ``tenant`` given since ``since`` (``MAY_HAVE_RUN``): when, and how many cents."""
    rows = await conn.execute(sa.select(_GIVEN_AT.label("at"), ACTION.c.amount_cents).where(*_given(tenant, since)))
    return [(row.at, int(row.amount_cents or 0)) for row in rows]


async def move(
    conn: AsyncConnection,
    action_id: str,
    *,
    from_: Collection[str],
    to: str,
    claimed_before: datetime | None = None,
    **values: Any,
) -> ActionRecord | None:
    """Move the action from one of ``from_`` to ``to`` (and set ``values``); the action as it now is, or None when
    it was in no status of ``from_`` (another replica or click got there first, or it never was). With
    ``claimed_before``, only an action whose claim is older than that (or that has none) moves: a claim that lapsed,
    taken over once."""
    where = [ACTION.c.action_id == action_id, ACTION.c.status.in_(list(from_))]
    if claimed_before is not None:
        where.append(sa.or_(ACTION.c.claimed_at.is_(None), ACTION.c.claimed_at < claimed_before))
    done = await conn.execute(sa.update(ACTION).where(*where).values(status=to, **values))
    return await get(conn, action_id) if done.rowcount else None


async def expired(
    conn: AsyncConnection, now: datetime, *, statuses: Collection[str], limit: int = 100
) -> list[ActionRecord]:
    """Actions of ``statuses`` (the open ones) whose time to be approved has passed, oldest first."""
    rows = await conn.execute(
        sa.select(ACTION)
        .where(ACTION.c.status.in_(list(statuses)), ACTION.c.expires_at.is_not(None), ACTION.c.expires_at <= now)
        .order_by(ACTION.c.expires_at)
        .limit(limit)
    )
    return [ActionRecord.of(row) for row in rows]


async def lapsed(
    conn: AsyncConnection,
    *,
    claimed: Collection[str],
    claimed_before: datetime,
    doubtful: Collection[str],
    limit: int = 100,
) -> list[ActionRecord]:
    """Actions to settle, oldest claim first: those of ``claimed`` whose claim is older than ``claimed_before`` (or
    that have none), and every one of ``doubtful``."""
    stale = sa.and_(
        ACTION.c.status.in_(list(claimed)),
        sa.or_(ACTION.c.claimed_at.is_(None), ACTION.c.claimed_at < claimed_before),
    )
    rows = await conn.execute(
        sa.select(ACTION)
        .where(sa.or_(stale, ACTION.c.status.in_(list(doubtful))))
        .order_by(ACTION.c.claimed_at, ACTION.c.action_id)
        .limit(limit)
    )
    return [ActionRecord.of(row) for row in rows]


async def count(conn: AsyncConnection, statuses: Collection[str]) -> int:
    """How many actions are in ``statuses``, over every tenant."""
    stmt = sa.select(sa.func.count()).select_from(ACTION).where(ACTION.c.status.in_(list(statuses)))
    return int((await conn.execute(stmt)).scalar_one())


async def twin(
    conn: AsyncConnection, conversation_id: str, digest: str, *, over: Collection[str]
) -> ActionRecord | None:
    """The conversation's latest action with the arguments ``digest`` that is not in one of ``over`` (the statuses
    after which the same request may be suggested again), or None."""
    row = (
        await conn.execute(
            sa.select(ACTION)
            .where(
                ACTION.c.conversation_id == conversation_id,
                ACTION.c.arguments_hash == digest,
                ACTION.c.status.not_in(list(over)),
            )
            .order_by(ACTION.c.suggested_at.desc(), ACTION.c.action_id)
            .limit(1)
        )
    ).first()
    return ActionRecord.of(row) if row is not None else None


async def of_suggestion(conn: AsyncConnection, suggestion_id: str, conversation_id: str) -> str | None:
    """The id of the action an ``action`` card of the conversation shows, or None (another kind, or unknown)."""
    row = (
        await conn.execute(
            sa.select(SUGGESTION.c.kind, SUGGESTION.c.action).where(
                SUGGESTION.c.suggestion_id == suggestion_id, SUGGESTION.c.conversation_id == conversation_id
            )
        )
    ).first()
    if row is None or row.kind != "action" or not isinstance(row.action, dict):
        return None
    found = row.action.get("action_id")
    return found if isinstance(found, str) else None


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
