"""The overview's time windows, and which one to open with when none is asked for.

A window is a span back from now cut into buckets (``15m`` in 15 seconds, ``1h`` in minutes, ``24h`` in hours,
...). Asked for by name, that window is shown. Otherwise the overview opens on the shortest window that holds
everything there is to count (the oldest suggestion, verdict or conversation of the viewer's tenants within the
longest window): a demo that ran for a few minutes opens on the last 15 minutes, spread over a dozen buckets, not on
a day in hours where it all falls into the last bar. With nothing to count, it opens on ``24h``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from vigil.cases.tables import CONVERSATION, FEEDBACK, SUGGESTION
from vigil.cases.views import CaseViews


@dataclass(frozen=True, slots=True)
class Window:
    """A named span back from now, and its bucket length."""

    name: str
    span: timedelta
    bucket_s: int


WINDOWS = {
    w.name: w
    for w in (
        Window("15m", timedelta(minutes=15), 15),
        Window("1h", timedelta(hours=1), 60),
        Window("24h", timedelta(hours=24), 3600),
        Window("7d", timedelta(days=7), 6 * 3600),
        Window("30d", timedelta(days=30), 86400),
        Window("26w", timedelta(weeks=26), 7 * 86400),  # the learning curve, week by week
    )
}
"""The windows offered, shortest first."""
DEFAULT = WINDOWS["24h"]
"""The window when there is nothing to count yet."""


def fitting(oldest: datetime | None, now: datetime) -> Window:
    """The shortest window reaching back to ``oldest`` (the longest if none does); ``DEFAULT`` for None."""
    if oldest is None:
        return DEFAULT
    longest = list(WINDOWS.values())[-1]
    return next((w for w in WINDOWS.values() if now - w.span <= oldest), longest)


async def oldest_record(views: CaseViews, tenants: Sequence[str] | None, now: datetime) -> datetime | None:
    """The oldest time the overview would count in the longest window: a suggestion made, a verdict given or a
    conversation's first customer message, of ``tenants`` (None: all); None when there is none.

    Raises:
        StoreUnavailable: the database could not be reached, or the reads took longer than the views' timeout.
        StoreError: the database refused a query.
    """
    since = now - list(WINDOWS.values())[-1].span
    s, f, c = SUGGESTION.c, FEEDBACK.c, CONVERSATION.c

    def of(column: sa.ColumnElement[str]) -> sa.ColumnElement[bool]:
        return sa.true() if tenants is None else column.in_(list(tenants))

    verdicts = sa.select(f.at).join_from(FEEDBACK, SUGGESTION, s.suggestion_id == f.suggestion_id)
    queries = [
        sa.select(sa.func.min(s.created_at)).where(s.created_at >= since, s.created_at < now, of(s.tenant)),
        verdicts.with_only_columns(sa.func.min(f.at)).where(f.at >= since, f.at < now, of(s.tenant)),
        sa.select(sa.func.min(c.first_customer_at)).where(
            c.first_customer_at >= since, c.first_customer_at < now, of(c.tenant)
        ),
    ]
    found = []
    async with views.reading() as conn:
        for query in queries:
            value = (await conn.execute(query)).scalar()
            if value is not None:
                found.append(value if value.tzinfo is not None else value.replace(tzinfo=UTC))
    return min(found, default=None)
