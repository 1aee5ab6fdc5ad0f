"""Analysts' verdicts on answers drawn from mined entries: what moves an entry's confidence.

An answer's first source is the entry it was drawn from; an analyst who accepts it (or edits it and sends it)
vouches for that entry, one who dismisses it does not. The miner reads the verdicts received since its mark, in
order, and counts them into the entries they name.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.cases.tables import FEEDBACK, SUGGESTION
from vigil.mining.tables import MINER_MARK

MARK = "feedback"
GOOD = frozenset({"accepted", "edited"})
BAD = frozenset({"dismissed"})


@dataclass(slots=True)
class Verdicts:
    """Verdicts per entry id, and the latest ``received_at`` among those read (the next mark)."""

    accepted: Counter[str] = field(default_factory=Counter)
    dismissed: Counter[str] = field(default_factory=Counter)
    until: datetime | None = None

    @property
    def entries(self) -> set[str]:
        return set(self.accepted) | set(self.dismissed)


async def since_mark(conn: AsyncConnection, *, limit: int = 10_000) -> Verdicts:
    """Up to ``limit`` verdicts received after the miner's mark, counted per entry their answer was drawn from."""
    mark = await conn.scalar(sa.select(MINER_MARK.c.at).where(MINER_MARK.c.name == MARK))
    query = (
        sa.select(FEEDBACK.c.verdict, FEEDBACK.c.received_at, SUGGESTION.c.sources)
        .join(SUGGESTION, SUGGESTION.c.suggestion_id == FEEDBACK.c.suggestion_id)
        .order_by(FEEDBACK.c.received_at)
        .limit(limit)
    )
    if mark is not None:
        query = query.where(FEEDBACK.c.received_at > mark)
    rows = (await conn.execute(query)).all()
    if len(rows) == limit and rows[0].received_at != rows[-1].received_at:
        # The batch is full: leave the last moment's verdicts for the next run, which reads after the mark.
        rows = [r for r in rows if r.received_at != rows[-1].received_at]
    found = Verdicts()
    for verdict, received_at, sources in rows:
        found.until = received_at
        entry = sources[0].get("id") if sources else None
        if entry is None:
            continue
        if verdict in GOOD:
            found.accepted[entry] += 1
        elif verdict in BAD:
            found.dismissed[entry] += 1
    return found
