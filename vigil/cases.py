"""How each event changes a case, written as SQL that is idempotent by the event's id.

Every function here runs inside a transaction the caller owns: it inserts the event row (doing nothing if the
id is already stored) and, only for a new event, updates the conversation's state in the same transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.errors import EventConflict
from vigil.events import CaseEvent, Feedback, Message
from vigil.tables import CaseEventRow, Conversation, FeedbackRow, MessageRow

CONVERSATION = Conversation.__table__  # type: ignore[attr-defined]
MESSAGE = MessageRow.__table__  # type: ignore[attr-defined]
CASE_EVENT = CaseEventRow.__table__  # type: ignore[attr-defined]
FEEDBACK = FeedbackRow.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class CaseState:
    """A conversation's state after an event, as skills see it."""

    conversation_id: str
    tenant: str
    status: str
    assignee: str | None
    priority: str | None
    opened_at: datetime
    updated_at: datetime
    closed_at: datetime | None
    message_count: int

    @classmethod
    def from_row(cls, row: sa.Row[Any]) -> CaseState:
        """Build from a ``conversation`` row."""
        m = row._mapping
        return cls(
            conversation_id=m["id"],
            tenant=m["tenant"],
            status=m["status"],
            assignee=m["assignee"],
            priority=m["priority"],
            opened_at=m["opened_at"],
            updated_at=m["updated_at"],
            closed_at=m["closed_at"],
            message_count=m["message_count"],
        )


@dataclass(frozen=True, slots=True)
class Recorded:
    """The outcome of recording one event: whether it was new, and the case after it."""

    new: bool
    case: CaseState | None = None


def upsert(conn: AsyncConnection, table: sa.Table) -> Any:
    """The dialect's INSERT that knows ON CONFLICT (SQLite and PostgreSQL)."""
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


async def record(
    conn: AsyncConnection, event: Message | CaseEvent | Feedback, received_at: datetime, default_tenant: str
) -> Recorded:
    """Store ``event`` and apply it to its case; a second call with the same event id changes nothing.

    Raises:
        EventConflict: the event names a conversation that belongs to another tenant.
    """
    if isinstance(event, Message):
        return await _message(conn, event, received_at, default_tenant)
    if isinstance(event, CaseEvent):
        return await _case_event(conn, event, received_at, default_tenant)
    return await _feedback(conn, event, received_at)


async def _message(conn: AsyncConnection, m: Message, received_at: datetime, default_tenant: str) -> Recorded:
    row = {
        "message_id": m.message_id,
        "conversation_id": m.conversation_id,
        "sent_at": m.sent_at,
        "received_at": received_at,
        "role": m.role,
        "author": m.author,
        "text": m.text,
        "metadata": m.metadata,
    }
    inserted = await conn.execute(upsert(conn, MESSAGE).values(row).on_conflict_do_nothing())
    if inserted.rowcount == 0:
        return Recorded(new=False)
    c = CONVERSATION.c
    at = m.sent_at
    new: dict[str, Any] = {"status": "open", "message_count": 1, "opened_at": at, "updated_at": at}
    changes: dict[str, Any] = {"message_count": c.message_count + 1, "updated_at": at}
    if m.role == "customer":
        new |= {"first_customer_at": at, "last_customer_at": at}
        changes |= {"last_customer_at": at, "first_customer_at": sa.func.coalesce(c.first_customer_at, at)}
    elif m.role == "analyst":
        new["last_analyst_at"] = at
        changes["last_analyst_at"] = at
        changes["first_response_at"] = sa.case(
            (sa.and_(c.first_response_at.is_(None), c.first_customer_at.is_not(None)), at),
            else_=c.first_response_at,
        )
    return Recorded(new=True, case=await _apply(conn, m.conversation_id, m.tenant, default_tenant, new, changes))


async def _case_event(conn: AsyncConnection, e: CaseEvent, received_at: datetime, default_tenant: str) -> Recorded:
    row = {
        "event_id": e.event_id,
        "conversation_id": e.conversation_id,
        "at": e.at,
        "received_at": received_at,
        "event": e.event,
        "assignee": e.assignee,
        "priority": e.priority,
        "status": e.status,
        "resolution": e.resolution.model_dump() if e.resolution else None,
    }
    inserted = await conn.execute(upsert(conn, CASE_EVENT).values(row).on_conflict_do_nothing())
    if inserted.rowcount == 0:
        return Recorded(new=False)
    changes: dict[str, Any] = {"updated_at": e.at}
    if e.assignee:
        changes["assignee"] = e.assignee
    if e.priority:
        changes["priority"] = e.priority
    changes |= _status_change(e)
    new = {"status": "open", "opened_at": e.at, "message_count": 0, **changes}
    return Recorded(new=True, case=await _apply(conn, e.conversation_id, e.tenant, default_tenant, new, changes))


def _status_change(e: CaseEvent) -> dict[str, Any]:
    if e.event in ("opened", "reopened"):
        return {"status": "open", "closed_at": None}
    if e.event == "escalated":
        return {"status": "escalated"}
    if e.event == "status":
        return {"status": e.status}
    if e.event == "closed":
        r = e.resolution
        return {
            "status": "closed",
            "closed_at": e.at,
            "resolved_by": r.resolved_by if r else None,
            "resolution_summary": r.summary if r else None,
            "csat": r.csat if r else None,
        }
    return {}


async def _apply(
    conn: AsyncConnection,
    conversation_id: str,
    tenant: str | None,
    default_tenant: str,
    new: dict[str, Any],
    changes: dict[str, Any],
) -> CaseState:
    """Create the conversation with ``new`` or update it with ``changes``, refusing another tenant's case."""
    c = CONVERSATION.c
    stmt = upsert(conn, CONVERSATION).values(id=conversation_id, tenant=tenant or default_tenant, **new)
    stmt = stmt.on_conflict_do_update(
        index_elements=[c.id],
        set_=changes,
        where=(c.tenant == tenant) if tenant else None,
    ).returning(*CONVERSATION.c)
    row = (await conn.execute(stmt)).first()
    if row is None:
        raise EventConflict(
            "tenant_mismatch", f"conversation {conversation_id!r} belongs to another tenant than {tenant!r}"
        )
    return CaseState.from_row(row)


async def _feedback(conn: AsyncConnection, f: Feedback, received_at: datetime) -> Recorded:
    if f.tenant is not None:
        owner = await conn.scalar(sa.select(CONVERSATION.c.tenant).where(CONVERSATION.c.id == f.conversation_id))
        if owner is not None and owner != f.tenant:
            raise EventConflict(
                "tenant_mismatch",
                f"conversation {f.conversation_id!r} belongs to another tenant than {f.tenant!r}",
            )
    row = {
        "feedback_id": f.feedback_id,
        "suggestion_id": f.suggestion_id,
        "conversation_id": f.conversation_id,
        "verdict": f.verdict,
        "by": f.by,
        "at": f.at,
        "received_at": received_at,
        "text": f.text,
    }
    inserted = await conn.execute(upsert(conn, FEEDBACK).values(row).on_conflict_do_nothing())
    return Recorded(new=inserted.rowcount == 1)
