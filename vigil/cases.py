"""How each event changes a case, written as SQL that is idempotent by the event's id.

Every function here runs inside a transaction the caller owns: it inserts the event row (doing nothing if the
id is already stored) and, only for a new event, updates the conversation's state in the same transaction.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
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


AnyEvent = Message | CaseEvent | Feedback


async def record_batch(
    conn: AsyncConnection, batch: Sequence[tuple[AnyEvent, datetime]], default_tenant: str
) -> list[Recorded]:
    """Record several events in one transaction; messages, the bulk of the stream, in a few bulk statements.

    Events of one conversation are applied in the order given.

    Raises:
        EventConflict: one of the events names another tenant's conversation (the caller retries them one by one).
    """
    results: list[Recorded] = [Recorded(new=False)] * len(batch)
    for turn in _turns(batch):
        messages = [i for i in turn if isinstance(batch[i][0], Message)]
        if messages:
            recorded = await _messages(conn, [batch[i] for i in messages], default_tenant)  # type: ignore[misc]
            for i, outcome in zip(messages, recorded, strict=True):
                results[i] = outcome
        for i in turn:
            if not isinstance(batch[i][0], Message):
                results[i] = await record(conn, batch[i][0], batch[i][1], default_tenant)
    return results


def _turns(batch: Sequence[tuple[AnyEvent, datetime]]) -> list[list[int]]:
    """Split a batch into turns holding at most one event per conversation, keeping each conversation's order."""
    turns: list[list[int]] = []
    depth: dict[str, int] = {}
    for index, (event, _) in enumerate(batch):
        level = depth.get(event.conversation_id, 0)
        depth[event.conversation_id] = level + 1
        if level == len(turns):
            turns.append([])
        turns[level].append(index)
    return turns


async def _messages(
    conn: AsyncConnection, batch: Sequence[tuple[Message, datetime]], default_tenant: str
) -> list[Recorded]:
    """Insert messages in bulk (skipping stored ids), then create or update their conversations in bulk."""
    stmt = _MESSAGE_INSERT[conn.dialect.name]
    inserted = set((await conn.execute(stmt, [_message_row(m, at) for m, at in batch])).scalars())
    fresh = [m for m, _ in batch if m.message_id in inserted]
    if not fresh:
        return [Recorded(new=False)] * len(batch)
    conversations = {m.conversation_id for m in fresh}
    owner_rows = await conn.execute(
        sa.select(CONVERSATION.c.id, CONVERSATION.c.tenant).where(CONVERSATION.c.id.in_(conversations))
    )
    owners: dict[str, str] = {conversation: tenant for conversation, tenant in owner_rows}
    for m in fresh:
        owner = owners.get(m.conversation_id)
        if m.tenant and owner and m.tenant != owner:
            raise EventConflict(
                "tenant_mismatch", f"conversation {m.conversation_id!r} belongs to another tenant than {m.tenant!r}"
            )
    rows = [_conversation_row(m, owners.get(m.conversation_id) or m.tenant or default_tenant) for m in fresh]
    states = {
        row.id: CaseState.from_row(row) for row in (await conn.execute(_MESSAGE_UPSERT[conn.dialect.name], rows)).all()
    }
    return [
        Recorded(new=True, case=states[m.conversation_id]) if m.message_id in inserted else Recorded(new=False)
        for m, _ in batch
    ]


def _message_row(m: Message, received_at: datetime) -> dict[str, Any]:
    return {
        "message_id": m.message_id,
        "conversation_id": m.conversation_id,
        "sent_at": m.sent_at,
        "received_at": received_at,
        "role": m.role,
        "author": m.author,
        "text": m.text,
        "metadata": m.metadata,
    }


def _conversation_row(m: Message, tenant: str) -> dict[str, Any]:
    at = m.sent_at
    return {
        "id": m.conversation_id,
        "tenant": tenant,
        "status": "open",
        "opened_at": at,
        "updated_at": at,
        "message_count": 1,
        "first_customer_at": at if m.role == "customer" else None,
        "last_customer_at": at if m.role == "customer" else None,
        "last_analyst_at": at if m.role == "analyst" else None,
    }


def _message_upsert(dialect: Any) -> Any:
    """How a new message changes its conversation, driven by the inserted row so that one statement serves all."""
    c = CONVERSATION.c
    stmt = dialect.insert(CONVERSATION)
    new = stmt.excluded
    return stmt.on_conflict_do_update(
        index_elements=[c.id],
        set_={
            "message_count": c.message_count + new.message_count,
            "updated_at": new.updated_at,
            "first_customer_at": sa.func.coalesce(c.first_customer_at, new.first_customer_at),
            "last_customer_at": sa.func.coalesce(new.last_customer_at, c.last_customer_at),
            "last_analyst_at": sa.func.coalesce(new.last_analyst_at, c.last_analyst_at),
            "first_response_at": sa.case(
                (
                    sa.and_(
                        c.first_response_at.is_(None),
                        c.first_customer_at.is_not(None),
                        new.last_analyst_at.is_not(None),
                    ),
                    new.last_analyst_at,
                ),
                else_=c.first_response_at,
            ),
        },
    ).returning(*CONVERSATION.c)


_DIALECTS: dict[str, Any] = {"sqlite": sqlite, "postgresql": postgresql}
_MESSAGE_UPSERT = {name: _message_upsert(dialect) for name, dialect in _DIALECTS.items()}
_MESSAGE_INSERT = {
    name: dialect.insert(MESSAGE).on_conflict_do_nothing().returning(MESSAGE.c.message_id)
    for name, dialect in _DIALECTS.items()
}
_INSERT_NEW = {
    (name, table.name): dialect.insert(table).on_conflict_do_nothing()
    for name, dialect in _DIALECTS.items()
    for table in (CASE_EVENT, FEEDBACK)
}


async def record(
    conn: AsyncConnection, event: Message | CaseEvent | Feedback, received_at: datetime, default_tenant: str
) -> Recorded:
    """Store ``event`` and apply it to its case; a second call with the same event id changes nothing.

    Raises:
        EventConflict: the event names a conversation that belongs to another tenant.
    """
    if isinstance(event, Message):
        return (await _messages(conn, [(event, received_at)], default_tenant))[0]
    if isinstance(event, CaseEvent):
        return await _case_event(conn, event, received_at, default_tenant)
    return await _feedback(conn, event, received_at)


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
    inserted = await conn.execute(_INSERT_NEW[conn.dialect.name, "case_event"], row)
    if inserted.rowcount == 0:
        return Recorded(new=False)
    changes: dict[str, Any] = {"updated_at": e.at}
    if e.assignee:
        changes["assignee"] = e.assignee
    if e.priority:
        changes["priority"] = e.priority
    changes |= _status_change(e)
    stmt = _case_upsert(conn.dialect.name, frozenset(changes), guard_tenant=e.tenant is not None)
    values = {
        "id": e.conversation_id,
        "tenant": e.tenant or default_tenant,
        "status": "open",
        "opened_at": e.at,
        "message_count": 0,
        **changes,
    }
    row_after = (await conn.execute(stmt, values)).first()
    if row_after is None:
        raise EventConflict(
            "tenant_mismatch", f"conversation {e.conversation_id!r} belongs to another tenant than {e.tenant!r}"
        )
    return Recorded(new=True, case=CaseState.from_row(row_after))


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


@functools.cache
def _case_upsert(dialect: str, changed: frozenset[str], *, guard_tenant: bool) -> Any:
    """Create the conversation, or change the ``changed`` columns; refuse another tenant's case if guarded."""
    c = CONVERSATION.c
    stmt = _DIALECTS[dialect].insert(CONVERSATION)
    new = stmt.excluded
    return stmt.on_conflict_do_update(
        index_elements=[c.id],
        set_={name: getattr(new, name) for name in sorted(changed)},
        where=(c.tenant == new.tenant) if guard_tenant else None,
    ).returning(*CONVERSATION.c)


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
    inserted = await conn.execute(_INSERT_NEW[conn.dialect.name, "feedback"], row)
    return Recorded(new=inserted.rowcount == 1)
