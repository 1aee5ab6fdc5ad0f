"""Analysts' verdicts on answers drawn from mined entries: what moves an entry's confidence.

An answer's first source is the entry it was drawn from; an analyst who accepts it (or edits it and sends it)
vouches for that entry, one who dismisses it does not. The miner reads the verdicts received since its mark, in
order, and counts them into the entries they name.

``received_at`` is stamped by whichever replica stored the verdict, on its own clock, and a verdict may commit after
a later one: a mark alone would skip a verdict stamped a little before it but stored after the miner read. So the
miner reads from ``OVERLAP`` before its mark and keeps the verdicts it counted that recent (``counted_verdict``):
each is counted once, and only a verdict stored more than ``OVERLAP`` late is missed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.cases.tables import FEEDBACK, SUGGESTION
from vigil.db.engine import upsert
from vigil.mining.tables import COUNTED_VERDICT, MINER_MARK

MARK = "feedback"
GOOD = frozenset({"accepted", "edited"})
BAD = frozenset({"dismissed"})
OVERLAP = timedelta(minutes=15)
"""How far before its mark the miner reads again: more than any replica's clock is behind, or a write is late."""


@dataclass(slots=True)
class Verdicts:
    """Verdicts per entry id, the verdicts read (to record as counted), and the next mark."""

    accepted: Counter[str] = field(default_factory=Counter)
    dismissed: Counter[str] = field(default_factory=Counter)
    read: list[dict[str, object]] = field(default_factory=list)
    until: datetime | None = None

    @property
    def entries(self) -> set[str]:
        return set(self.accepted) | set(self.dismissed)


async def since_mark(conn: AsyncConnection, *, limit: int = 10_000) -> Verdicts:
    """Up to ``limit`` verdicts not yet counted, received after ``OVERLAP`` before the miner's mark, counted per
    entry their answer was drawn from."""
    mark = await conn.scalar(sa.select(MINER_MARK.c.at).where(MINER_MARK.c.name == MARK))
    counted = sa.and_(
        COUNTED_VERDICT.c.conversation_id == FEEDBACK.c.conversation_id,
        COUNTED_VERDICT.c.feedback_id == FEEDBACK.c.feedback_id,
    )
    query = (
        sa.select(
            FEEDBACK.c.conversation_id,
            FEEDBACK.c.feedback_id,
            FEEDBACK.c.verdict,
            FEEDBACK.c.received_at,
            SUGGESTION.c.sources,
        )
        .join(SUGGESTION, SUGGESTION.c.suggestion_id == FEEDBACK.c.suggestion_id)
        .where(~sa.exists().where(counted))
        .order_by(FEEDBACK.c.received_at)
        .limit(limit)
    )
    if mark is not None:
        query = query.where(FEEDBACK.c.received_at > mark - OVERLAP)
    rows = (await conn.execute(query)).all()
    if len(rows) == limit and rows[0].received_at != rows[-1].received_at:
        # The batch is full: leave the last moment's verdicts for the next run.
        rows = [r for r in rows if r.received_at != rows[-1].received_at]
    found = Verdicts(until=mark)
    for row in rows:
        found.until = row.received_at if found.until is None else max(found.until, row.received_at)
        found.read.append(
            {"conversation_id": row.conversation_id, "feedback_id": row.feedback_id, "received_at": row.received_at}
        )
        entry = row.sources[0].get("id") if row.sources else None
        if entry is None:
            continue
        if row.verdict in GOOD:
            found.accepted[entry] += 1
        elif row.verdict in BAD:
            found.dismissed[entry] += 1
    return found


async def mark_counted(conn: AsyncConnection, verdicts: Verdicts) -> None:
    """In the miner's transaction: record ``verdicts`` as counted, move the mark, forget what is now too old to be
    read again."""
    if not verdicts.read or verdicts.until is None:
        return
    await conn.execute(upsert(conn, COUNTED_VERDICT).on_conflict_do_nothing(), verdicts.read)
    stmt = upsert(conn, MINER_MARK)
    await conn.execute(
        stmt.on_conflict_do_update(index_elements=[MINER_MARK.c.name], set_={"at": stmt.excluded.at}),
        {"name": MARK, "at": verdicts.until},
    )
    await conn.execute(sa.delete(COUNTED_VERDICT).where(COUNTED_VERDICT.c.received_at <= verdicts.until - OVERLAP))
