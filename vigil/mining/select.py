"""Which cases the miner takes: closed since its watermark, resolved by a human, not mined at that closure yet; and
which mined cases were reopened since, so that what they taught is withdrawn.

The watermark is the latest closure the miner has dealt with. A run looks ``lateness`` behind it, so a closure that
reached vigil late (an event stream lags, a replica was down) is still taken; the ``mined_case`` record, not the
watermark, is what makes a case mined once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.cases.tables import CONVERSATION, MESSAGE
from vigil.mining.tables import MINED_CASE


@dataclass(frozen=True, slots=True)
class Turn:
    """One message of a case, as the miner reads it."""

    message_id: str
    role: str
    author: str | None
    text: str
    sent_at: datetime
    finished_at: datetime | None = None
    """When vigil's skills had finished with it; None for a message they never saw (history imported)."""


@dataclass(frozen=True, slots=True)
class ClosedCase:
    """A closed, human-resolved case and its conversation, in order."""

    conversation_id: str
    tenant: str
    closed_at: datetime
    summary: str | None
    csat: int | None
    turns: tuple[Turn, ...]

    @property
    def authors(self) -> set[str]:
        """The people known to the case (whose names are redacted wherever they appear)."""
        return {t.author for t in self.turns if t.author and t.role in ("customer", "analyst")}


@dataclass(frozen=True, slots=True)
class Reopened:
    """A mined case that is open again, or closed again at another time: what it taught is withdrawn."""

    conversation_id: str
    entry_id: str | None


async def watermark(conn: AsyncConnection) -> datetime | None:
    """The latest closure the miner has dealt with, or None before its first case."""
    value: datetime | None = await conn.scalar(sa.select(sa.func.max(MINED_CASE.c.closed_at)))
    return value


async def due(conn: AsyncConnection, *, now: datetime, lateness: timedelta, limit: int) -> list[ClosedCase]:
    """Up to ``limit`` cases closed by a human no later than ``now``, since the watermark less ``lateness``, that
    the miner has not dealt with at that closure; oldest closure first."""
    since = await watermark(conn)
    mined = MINED_CASE.alias("mined")
    query = (
        sa.select(
            CONVERSATION.c.id,
            CONVERSATION.c.tenant,
            CONVERSATION.c.closed_at,
            CONVERSATION.c.resolution_summary,
            CONVERSATION.c.csat,
        )
        .outerjoin(mined, mined.c.conversation_id == CONVERSATION.c.id)
        .where(
            CONVERSATION.c.status == "closed",
            CONVERSATION.c.resolved_by == "human",
            CONVERSATION.c.closed_at <= now,
            sa.or_(mined.c.conversation_id.is_(None), mined.c.closed_at < CONVERSATION.c.closed_at),
        )
        .order_by(CONVERSATION.c.closed_at, CONVERSATION.c.id)
        .limit(limit)
    )
    if since is not None:
        query = query.where(CONVERSATION.c.closed_at >= since - lateness)
    cases = (await conn.execute(query)).all()
    turns = await _turns(conn, [c.id for c in cases])
    return [
        ClosedCase(
            conversation_id=c.id,
            tenant=c.tenant,
            closed_at=c.closed_at,
            summary=c.resolution_summary,
            csat=c.csat,
            turns=tuple(turns.get(c.id, ())),
        )
        for c in cases
    ]


async def reopened(conn: AsyncConnection) -> list[Reopened]:
    """Mined cases whose conversation is no longer closed at the closure that was mined."""
    rows = await conn.execute(
        sa.select(MINED_CASE.c.conversation_id, MINED_CASE.c.entry_id)
        .join(CONVERSATION, CONVERSATION.c.id == MINED_CASE.c.conversation_id)
        .where(
            MINED_CASE.c.outcome == "mined",
            sa.or_(CONVERSATION.c.closed_at.is_(None), CONVERSATION.c.closed_at != MINED_CASE.c.closed_at),
        )
        .order_by(MINED_CASE.c.conversation_id)
    )
    return [Reopened(row.conversation_id, row.entry_id) for row in rows]


async def _turns(conn: AsyncConnection, conversation_ids: Sequence[str]) -> dict[str, list[Turn]]:
    found: dict[str, list[Turn]] = {}
    for start in range(0, len(conversation_ids), 500):  # bound the IN list
        chunk = list(conversation_ids[start : start + 500])
        rows = await conn.execute(
            sa.select(
                MESSAGE.c.conversation_id,
                MESSAGE.c.message_id,
                MESSAGE.c.role,
                MESSAGE.c.author,
                MESSAGE.c.text,
                MESSAGE.c.sent_at,
                MESSAGE.c.finished_at,
            )
            .where(MESSAGE.c.conversation_id.in_(chunk))
            .order_by(MESSAGE.c.conversation_id, MESSAGE.c.seq)
        )
        for row in rows:
            found.setdefault(row.conversation_id, []).append(
                Turn(row.message_id, row.role, row.author, row.text, row.sent_at, row.finished_at)
            )
    return found
