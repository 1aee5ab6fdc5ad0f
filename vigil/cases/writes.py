"""How each event changes a case, written as SQL that is idempotent by the event's conversation and id.

Every function here runs inside a transaction the caller owns: it inserts the event row (doing nothing if the
conversation already holds an event of that id) and, only for a new event, updates the conversation's state in
the same transaction.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.cases.states import State, Trigger, next_state, sql_next, status_trigger
from vigil.cases.tables import CASE_EVENT, CONVERSATION, FEEDBACK, MESSAGE, SUGGESTION
from vigil.core.errors import EventConflict
from vigil.db.engine import insert, upsert
from vigil.db.schema import metadata
from vigil.flow.case import CaseState, Recorded
from vigil.wire.events import CaseEvent, Event, Feedback, Message

_CASE_COLUMNS = tuple(
    CONVERSATION.c[name]
    for name in (
        "id",
        "tenant",
        "status",
        "assignee",
        "priority",
        "opened_at",
        "updated_at",
        "closed_at",
        "message_count",
        "last_customer_at",
        "last_analyst_at",
        "first_customer_at",
        "first_response_at",
        "state",
        "state_since",
    )
)
"""The columns of ``conversation`` that ``case_state`` reads."""


def case_state(row: sa.Row[Any]) -> CaseState:
    """A case's state from its ``conversation`` row (``_CASE_COLUMNS`` of it, at least)."""
    m = row._mapping
    return CaseState(
        conversation_id=m["id"],
        tenant=m["tenant"],
        status=m["status"],
        assignee=m["assignee"],
        priority=m["priority"],
        opened_at=m["opened_at"],
        updated_at=m["updated_at"],
        closed_at=m["closed_at"],
        message_count=m["message_count"],
        last_customer_at=m["last_customer_at"],
        last_analyst_at=m["last_analyst_at"],
        first_customer_at=m["first_customer_at"],
        first_response_at=m["first_response_at"],
        state=m["state"],
        state_since=m["state_since"] or m["opened_at"],
    )


async def record(
    conn: AsyncConnection,
    event: Event,
    received_at: datetime,
    default_tenant: str,
    *,
    future_skew: timedelta,
) -> Recorded:
    """Store ``event`` and apply it to its case; a second call with the same event id changes nothing.

    The case takes the event's time, but at most ``future_skew`` after ``received_at``: a sender's clock far
    ahead must not keep a conversation on top of the lists that sort by it.

    Raises:
        EventConflict: the event names a conversation that belongs to another tenant.
    """
    return (await record_batch(conn, [(event, received_at)], default_tenant, future_skew=future_skew))[0]


async def record_batch(
    conn: AsyncConnection,
    batch: Sequence[tuple[Event, datetime]],
    default_tenant: str,
    *,
    future_skew: timedelta,
) -> list[Recorded]:
    """``record`` for many events at once, with a few multi-row statements rather than two per event.

    Events of one conversation must come one per batch (ingest's lanes see to it); a batch that breaks this
    is recorded one event at a time, in order.

    Raises:
        EventConflict: an event names a conversation that belongs to another tenant (nothing says which one:
            the caller retries the events one by one).
    """
    if len(batch) > 1 and len({event.conversation_id for event, _ in batch}) < len(batch):
        return [await record(conn, event, at, default_tenant, future_skew=future_skew) for event, at in batch]
    new_ids = await _insert_events(conn, batch)
    results: dict[int, Recorded] = {}
    changes: dict[_Shape, list[tuple[int, dict[str, Any]]]] = {}
    for index, (event, received_at) in enumerate(batch):
        if isinstance(event, Feedback):
            results[index] = await _feedback(conn, event, received_at)
        elif (event.conversation_id, event.id) not in new_ids:
            results[index] = await _stored_before(conn, event)
        else:
            shape, row = _conversation_change(event, default_tenant, latest=received_at + future_skew)
            changes.setdefault(shape, []).append((index, row))
    for shape, rows in changes.items():
        statement = _upsert_conversations(conn.dialect.name, shape)
        states = {row.id: case_state(row) for row in await conn.execute(statement, [r for _, r in rows])}
        for index, row in rows:
            if row["id"] not in states:
                raise EventConflict("tenant_mismatch", f"conversation {row['id']!r} belongs to another tenant")
            results[index] = Recorded(new=True, case=states[row["id"]])
    return [results[index] for index in range(len(batch))]


async def _insert_events(conn: AsyncConnection, batch: Sequence[tuple[Event, datetime]]) -> set[tuple[str, str]]:
    """Insert the message and case-event rows that are not stored yet; returns (conversation id, event id) of the
    new ones (an id alone could be another conversation's)."""
    messages = [_message_row(e, at) for e, at in batch if isinstance(e, Message)]
    case_events = [_case_event_row(e, at) for e, at in batch if isinstance(e, CaseEvent)]
    new: set[tuple[str, str]] = set()
    for table, key, rows in ((MESSAGE, "message_id", messages), (CASE_EVENT, "event_id", case_events)):
        if rows:
            inserted = await conn.execute(_insert_new(conn.dialect.name, table.name, key), rows)
            new |= {(row[0], row[1]) for row in inserted}
    return new


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


def _case_event_row(e: CaseEvent, received_at: datetime) -> dict[str, Any]:
    return {
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


# What an event does to its conversation row: ("message", role) or ("case", changed columns), whether the row's
# tenant must match, and the trigger it is for the case's state (vigil/cases/states.py). Events of one shape share
# one multi-row upsert.
_Shape = tuple[str, tuple[str, ...], bool, Trigger | None]

_ROLE_TRIGGERS = {"customer": Trigger.CUSTOMER, "analyst": Trigger.ANALYST}
_CASE_TRIGGERS = {
    "opened": Trigger.OPENED,
    "escalated": Trigger.ESCALATED,
    "closed": Trigger.CLOSED,
    "reopened": Trigger.REOPENED,
}


def trigger_of(event: Message | CaseEvent) -> Trigger | None:
    """What ``event`` is to its case's state; None when it leaves the state alone (a bot's message, an assignment,
    a status vigil does not know)."""
    if isinstance(event, Message):
        return _ROLE_TRIGGERS.get(event.role)
    if event.event == "status":
        return status_trigger(event.status)
    return _CASE_TRIGGERS.get(event.event)


def _conversation_change(
    event: Message | CaseEvent, default_tenant: str, *, latest: datetime
) -> tuple[_Shape, dict[str, Any]]:
    """The shape of ``event``'s change and the conversation row it inserts (or, on conflict, updates with); its
    times are the event's, but no later than ``latest``."""
    row: dict[str, Any] = {"id": event.conversation_id, "tenant": event.tenant or default_tenant}
    checked = event.tenant is not None
    at = min(event.occurred_at, latest)
    trigger = trigger_of(event)
    row |= {"state": next_state(None, trigger) if trigger else State.NEW, "state_since": at}
    if isinstance(event, Message):
        row |= {"status": "open", "message_count": 1, "opened_at": at, "updated_at": at}
        if event.role == "customer":
            row |= {"first_customer_at": at, "last_customer_at": at}
        elif event.role == "analyst":
            row["last_analyst_at"] = at
        role = event.role if event.role in ("customer", "analyst") else "other"
        return ("message", (role,), checked, trigger), row
    changes: dict[str, Any] = {"updated_at": at}
    if event.assignee:
        changes["assignee"] = event.assignee
    if event.priority:
        changes["priority"] = event.priority
    changes |= _status_change(event, at)
    row |= {"status": "open", "opened_at": at, "message_count": 0, **changes}
    return ("case", tuple(sorted(changes)), checked, trigger), row


def _status_change(e: CaseEvent, at: datetime) -> dict[str, Any]:
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
            "closed_at": at,
            "resolved_by": r.resolved_by if r else None,
            "resolution_summary": r.summary if r else None,
            "csat": r.csat if r else None,
        }
    return {}


@functools.cache
def _insert_new(dialect: str, table: str, key: str) -> Any:
    """INSERT ... ON CONFLICT DO NOTHING RETURNING the key: run with many rows, it returns the new ones."""
    target = metadata.tables[table]
    return insert(dialect, target).on_conflict_do_nothing().returning(target.c.conversation_id, target.c[key])


@functools.cache
def _upsert_conversations(dialect: str, shape: _Shape) -> Any:
    """Create conversations or apply one shape of change to them; rows of another tenant are left alone."""
    kind, detail, checked, trigger = shape
    c = CONVERSATION.c
    stmt = insert(dialect, CONVERSATION)
    new = stmt.excluded  # the row the event would have inserted
    changes: dict[str, Any]
    if kind == "case":
        changes = {name: new[name] for name in detail}
    else:
        changes = {"message_count": c.message_count + 1, "updated_at": new.updated_at}
        if detail == ("customer",):
            changes |= {
                "last_customer_at": new.last_customer_at,
                "first_customer_at": sa.func.coalesce(c.first_customer_at, new.first_customer_at),
            }
        elif detail == ("analyst",):
            changes["last_analyst_at"] = new.last_analyst_at
            changes["first_response_at"] = sa.case(
                (sa.and_(c.first_response_at.is_(None), c.first_customer_at.is_not(None)), new.last_analyst_at),
                else_=c.first_response_at,
            )
    if trigger is not None:
        state = sql_next(c.state, trigger)
        changes["state"] = state
        changes["state_since"] = sa.case((state != c.state, new.state_since), else_=c.state_since)
    return stmt.on_conflict_do_update(
        index_elements=[c.id], set_=changes, where=(c.tenant == new.tenant) if checked else None
    ).returning(*_CASE_COLUMNS)


async def _feedback(conn: AsyncConnection, f: Feedback, received_at: datetime) -> Recorded:
    head = (await conn.execute(sa.select(CONVERSATION).where(CONVERSATION.c.id == f.conversation_id))).first()
    if head is None:
        # A verdict comes after the suggestion it judges, in the conversation's order. Taking one for a conversation
        # not yet seen would let it wait there for a suggestion made later, in whatever tenant opens the conversation.
        raise EventConflict("unknown_conversation", f"feedback on conversation {f.conversation_id!r}, not seen yet")
    if f.tenant is not None and head.tenant != f.tenant:
        raise EventConflict(
            "tenant_mismatch", f"conversation {f.conversation_id!r} belongs to another tenant than {f.tenant!r}"
        )
    judged = (
        await conn.execute(
            sa.select(SUGGESTION.c.conversation_id, SUGGESTION.c.tenant, SUGGESTION.c.kind).where(
                SUGGESTION.c.suggestion_id == f.suggestion_id
            )
        )
    ).first()
    _check_judged(f, judged)
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
    kind = judged.kind if judged else None
    if inserted.rowcount == 1:
        return Recorded(new=True, case=case_state(head), suggestion_kind=kind)
    finished = await _finished_at(conn, f)
    return Recorded(new=False, case=case_state(head), suggestion_kind=kind, finished=finished is not None)


async def _stored_before(conn: AsyncConnection, event: Message | CaseEvent) -> Recorded:
    """What recording an event stored before comes to: nothing new, and whether its skills had finished with it (if
    not, the case as it stands now, to show it to them again). Rare: a redelivery."""
    if await _finished_at(conn, event) is not None:
        return Recorded(new=False, finished=True)
    head = (await conn.execute(sa.select(*_CASE_COLUMNS).where(CONVERSATION.c.id == event.conversation_id))).first()
    return Recorded(new=False, case=case_state(head) if head is not None else None)


def _key(event: Event) -> tuple[sa.Table, sa.Column[Any]]:
    """The table an event is stored in, and the column of its own id there."""
    if isinstance(event, Message):
        return MESSAGE, MESSAGE.c.message_id
    if isinstance(event, CaseEvent):
        return CASE_EVENT, CASE_EVENT.c.event_id
    return FEEDBACK, FEEDBACK.c.feedback_id


async def _finished_at(conn: AsyncConnection, event: Event) -> datetime | None:
    table, own_id = _key(event)
    at: datetime | None = (
        await conn.execute(
            sa.select(table.c.finished_at).where(table.c.conversation_id == event.conversation_id, own_id == event.id)
        )
    ).scalar()
    return at


async def mark_finished(conn: AsyncConnection, events: Sequence[Event], at: datetime) -> None:
    """Note that the skills have finished with these events, at ``at``: one statement per table, run for every
    event at once (executemany), each row found through its table's key. Not a row-value IN list: SQLite answers
    that by scanning the whole table, so a batch's marks cost as much as the table is long."""
    by_table: dict[str, tuple[sa.Table, sa.Column[Any], list[dict[str, str]]]] = {}
    for event in events:
        table, own_id = _key(event)
        by_table.setdefault(table.name, (table, own_id, []))[2].append(
            {"key_conversation": event.conversation_id, "key_id": event.id}
        )
    for table, own_id, keys in by_table.values():
        await conn.execute(
            sa.update(table)
            .where(
                table.c.conversation_id == sa.bindparam("key_conversation"),
                own_id == sa.bindparam("key_id"),
                table.c.finished_at.is_(None),
            )
            .values(finished_at=at),
            keys,
        )


def _check_judged(f: Feedback, judged: sa.Row[Any] | None) -> None:
    """Refuse a verdict on a suggestion made in another conversation: suggestion ids can be guessed, and one
    tenant's analysts must not judge (and so train vigil on) another's suggestions."""
    if judged is None:
        return  # a suggestion vigil does not know: nothing of anyone's to protect
    if f.tenant is not None and judged.tenant != f.tenant:
        raise EventConflict(
            "tenant_mismatch", f"suggestion {f.suggestion_id!r} belongs to another tenant than {f.tenant!r}"
        )
    if judged.conversation_id != f.conversation_id:
        raise EventConflict(
            "address_mismatch",
            f"suggestion {f.suggestion_id!r} was made in another conversation than {f.conversation_id!r}",
        )
