"""What the progress capability stores of a case, and the panel reads: the analyst's commitments, and the
capability's latest reading of the case (its procedure and step, the customer's mood, the problem, what was tried).

Commitments are keyed by the message that made them (``<message id>#<n>``), so recording a message twice records
its promises once. A commitment leaves ``open`` once: ``kept``, ``missed`` or ``cancelled``.

The reads and writes that take many conversations at once serve the progress keeper (vigil/progress/keeper.py), which
writes for a whole group-committed batch of events with a few statements.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.cases.states import Trigger, sql_next
from vigil.cases.tables import CASE_EVENT, CASE_PROGRESS, COMMITMENT, CONVERSATION, MESSAGE
from vigil.db.engine import insert, upsert

OPEN = "open"
KEPT = "kept"
MISSED = "missed"
CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class Commitment:
    """A promise made to the customer."""

    commitment_id: str
    conversation_id: str
    message_id: str
    tenant: str
    what: str
    made_at: datetime
    due_at: datetime | None
    status: str = OPEN
    settled_at: datetime | None = None
    settled_by: str | None = None

    @classmethod
    def of(cls, row: sa.Row[Any]) -> Commitment:
        m = row._mapping
        return cls(**{name: m[name] for name in cls.__slots__})


@dataclass(slots=True)
class Reading:
    """The progress capability's latest reading of a case."""

    conversation_id: str
    updated_at: datetime
    category: str | None = None
    procedure: str | None = None
    step: str | None = None
    next_step: str | None = None
    next_reply: str | None = None
    sentiment: float | None = None
    chases: int = 0
    problem: str | None = None
    tried: list[str] = field(default_factory=list)
    handled_by: str | None = None

    @classmethod
    def of(cls, row: sa.Row[Any]) -> Reading:
        m = row._mapping
        return cls(**{name: m[name] for name in cls.__slots__})


async def add_commitments(conn: AsyncConnection, commitments: Sequence[Commitment]) -> None:
    """Store new commitments (one already stored is left as it is)."""
    if commitments:
        rows = [{name: getattr(c, name) for name in Commitment.__slots__} for c in commitments]
        await conn.execute(upsert(conn, COMMITMENT).on_conflict_do_nothing(), rows)


async def commitments(conn: AsyncConnection, conversation_id: str, *, status: str | None = None) -> list[Commitment]:
    """The conversation's commitments (of ``status``, if given), in the order they were made."""
    stmt = sa.select(COMMITMENT).where(COMMITMENT.c.conversation_id == conversation_id)
    if status is not None:
        stmt = stmt.where(COMMITMENT.c.status == status)
    rows = await conn.execute(stmt.order_by(COMMITMENT.c.made_at, COMMITMENT.c.commitment_id))
    return [Commitment.of(row) for row in rows]


async def commitment(conn: AsyncConnection, conversation_id: str, commitment_id: str) -> Commitment | None:
    """One commitment, or None."""
    row = (
        await conn.execute(
            sa.select(COMMITMENT).where(
                COMMITMENT.c.conversation_id == conversation_id, COMMITMENT.c.commitment_id == commitment_id
            )
        )
    ).first()
    return Commitment.of(row) if row is not None else None


async def settle(
    conn: AsyncConnection, conversation_id: str, commitment_id: str, status: str, *, at: datetime, by: str | None
) -> bool:
    """Close an open commitment as ``status``; False if it was no longer open."""
    done = await conn.execute(
        sa.update(COMMITMENT)
        .where(
            COMMITMENT.c.conversation_id == conversation_id,
            COMMITMENT.c.commitment_id == commitment_id,
            COMMITMENT.c.status == OPEN,
        )
        .values(status=status, settled_at=at, settled_by=by)
    )
    return done.rowcount == 1


@dataclass(frozen=True, slots=True)
class Settle:
    """An open commitment to close as ``status``, at ``at``, by ``by`` (a message, an event, a timer)."""

    conversation_id: str
    commitment_id: str
    status: str
    at: datetime
    by: str | None


_SETTLE = (
    sa.update(COMMITMENT)
    .where(
        COMMITMENT.c.conversation_id == sa.bindparam("b_conversation_id"),
        COMMITMENT.c.commitment_id == sa.bindparam("b_commitment_id"),
        COMMITMENT.c.status == OPEN,
    )
    .values(status=sa.bindparam("b_status"), settled_at=sa.bindparam("b_at"), settled_by=sa.bindparam("b_by"))
)


async def settle_all(conn: AsyncConnection, settles: Sequence[Settle]) -> None:
    """``settle`` each of them, in one statement."""
    if settles:
        rows = [
            {
                "b_conversation_id": s.conversation_id,
                "b_commitment_id": s.commitment_id,
                "b_status": s.status,
                "b_at": s.at,
                "b_by": s.by,
            }
            for s in settles
        ]
        await conn.execute(_SETTLE, rows)


_PROMISED = (
    sa.update(CONVERSATION)
    .where(
        CONVERSATION.c.id == sa.bindparam("b_id"),
        sql_next(CONVERSATION.c.state, Trigger.PROMISED) != CONVERSATION.c.state,
    )
    .values(state=sql_next(CONVERSATION.c.state, Trigger.PROMISED), state_since=sa.bindparam("b_at"))
)


async def promised(conn: AsyncConnection, owed: Sequence[tuple[str, datetime]]) -> None:
    """Each case ``(conversation id, when)`` whose analyst left a timed promise open: the ``promised`` transition
    (vigil/cases/states.py), since ``when``."""
    if owed:
        await conn.execute(_PROMISED, [{"b_id": conversation_id, "b_at": at} for conversation_id, at in owed])


_OPEN_IN = (
    sa.select(COMMITMENT)
    .where(COMMITMENT.c.conversation_id.in_(sa.bindparam("ids", expanding=True)), COMMITMENT.c.status == OPEN)
    .order_by(COMMITMENT.c.made_at, COMMITMENT.c.commitment_id)
)
_READINGS_IN = sa.select(CASE_PROGRESS).where(CASE_PROGRESS.c.conversation_id.in_(sa.bindparam("ids", expanding=True)))
# Built once, as the keeper's other batch reads: a statement made per call costs its construction and cache key.


async def open_commitments(conn: AsyncConnection, conversation_ids: Sequence[str]) -> dict[str, list[Commitment]]:
    """The open commitments of each of these conversations, in the order they were made."""
    found: dict[str, list[Commitment]] = {}
    if conversation_ids:
        for row in await conn.execute(_OPEN_IN, {"ids": list(conversation_ids)}):
            found.setdefault(row.conversation_id, []).append(Commitment.of(row))
    return found


async def readings(conn: AsyncConnection, conversation_ids: Sequence[str]) -> dict[str, Reading]:
    """The latest reading of each of these cases that has one."""
    if not conversation_ids:
        return {}
    rows = await conn.execute(_READINGS_IN, {"ids": list(conversation_ids)})
    return {row.conversation_id: Reading.of(row) for row in rows}


async def save_readings(conn: AsyncConnection, readings: Sequence[Reading]) -> None:
    """``save_reading`` each of them, in one statement."""
    if readings:
        rows = [{name: getattr(r, name) for name in Reading.__slots__} for r in readings]
        await conn.execute(_save_readings(conn.dialect.name), rows)


@functools.cache
def _save_readings(dialect: str) -> Any:
    """The upsert of readings, built once per dialect (building it costs more than running it for a batch)."""
    stmt = insert(dialect, CASE_PROGRESS)
    update = {name: stmt.excluded[name] for name in Reading.__slots__ if name != "conversation_id"}
    return stmt.on_conflict_do_update(index_elements=["conversation_id"], set_=update)


_LATEST = (
    sa.select(
        MESSAGE.c.conversation_id,
        MESSAGE.c.role,
        MESSAGE.c.text,
        MESSAGE.c.seq,
        sa.func.row_number().over(partition_by=MESSAGE.c.conversation_id, order_by=MESSAGE.c.seq.desc()).label("back"),
    )
    .where(MESSAGE.c.conversation_id.in_(sa.bindparam("ids", expanding=True)))
    .subquery()
)
_WAITING = (
    sa.select(_LATEST.c.conversation_id, _LATEST.c.role, _LATEST.c.text)
    .where(_LATEST.c.back <= sa.bindparam("recent"))
    .order_by(_LATEST.c.conversation_id, _LATEST.c.seq.desc())
)


async def waiting(conn: AsyncConnection, conversation_ids: Sequence[str], *, recent: int) -> dict[str, list[str]]:
    """For each of these conversations, the customer's messages since an analyst last wrote, oldest first, among
    its ``recent`` latest messages."""
    if not conversation_ids:
        return {}
    rows = await conn.execute(_WAITING, {"ids": list(conversation_ids), "recent": recent})
    found: dict[str, list[str]] = {conversation_id: [] for conversation_id in conversation_ids}
    reached: set[str] = set()  # conversations whose analyst's last message has been met, newest first
    for row in rows:
        if row.conversation_id in reached:
            continue
        if row.role == "analyst":
            reached.add(row.conversation_id)
        elif row.role == "customer":
            found[row.conversation_id].insert(0, row.text)
    return found


async def assignee_before(conn: AsyncConnection, conversation_id: str, event_id: str) -> str | None:
    """Who the case was assigned to before its case event ``event_id`` (None: nobody, or no such event)."""
    c = CASE_EVENT.c
    # A case has a few case events, read through the conversation's index; ordered by seq in SQL, SQLite walked the
    # whole table backwards by its rowid instead.
    rows = (
        await conn.execute(
            sa.select(c.seq, c.event_id, c.assignee).where(
                c.conversation_id == conversation_id, sa.or_(c.assignee.is_not(None), c.event_id == event_id)
            )
        )
    ).all()
    this = next((row.seq for row in rows if row.event_id == event_id), None)
    earlier = [row for row in rows if this is not None and row.seq < this and row.assignee is not None]
    return max(earlier, key=lambda row: row.seq).assignee if earlier else None


async def closed(conn: AsyncConnection, conversation_id: str) -> bool:
    """Whether the case is closed (a case vigil does not know is not)."""
    status = (await conn.execute(sa.select(CONVERSATION.c.status).where(CONVERSATION.c.id == conversation_id))).scalar()
    return status == "closed"


async def reading(conn: AsyncConnection, conversation_id: str) -> Reading | None:
    """The latest reading of the case, if there is one."""
    row = (
        await conn.execute(sa.select(CASE_PROGRESS).where(CASE_PROGRESS.c.conversation_id == conversation_id))
    ).first()
    return Reading.of(row) if row is not None else None


async def save_reading(conn: AsyncConnection, reading: Reading) -> None:
    """Store the latest reading of the case, in place of the one before."""
    row = {name: getattr(reading, name) for name in Reading.__slots__}
    stmt = upsert(conn, CASE_PROGRESS)
    update = {name: stmt.excluded[name] for name in row if name != "conversation_id"}
    await conn.execute(stmt.values(row).on_conflict_do_update(index_elements=["conversation_id"], set_=update))


async def save_step(
    conn: AsyncConnection,
    conversation_id: str,
    *,
    procedure: str | None,
    step: str | None,
    next_step: str | None,
    next_reply: str | None,
    at: datetime,
) -> None:
    """Store where the case stands in its procedure, leaving the rest of its reading as it is."""
    values = {"procedure": procedure, "step": step, "next_step": next_step, "next_reply": next_reply}
    stmt = upsert(conn, CASE_PROGRESS).values(
        conversation_id=conversation_id, chases=0, tried=[], updated_at=at, **values
    )
    await conn.execute(
        stmt.on_conflict_do_update(index_elements=["conversation_id"], set_={**values, "updated_at": at})
    )
