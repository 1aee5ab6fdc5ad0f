"""What the progress capability stores of a case, and the panel reads: the analyst's commitments, and the
capability's latest reading of the case (its procedure and step, the customer's mood, the problem, what was tried).

Commitments are keyed by the message that made them (``<message id>#<n>``), so recording a message twice records
its promises once. A commitment leaves ``open`` once: ``kept``, ``missed`` or ``cancelled``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.cases.tables import CASE_PROGRESS, COMMITMENT
from vigil.db.engine import upsert

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
