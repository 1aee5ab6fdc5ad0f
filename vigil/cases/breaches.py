"""A case in breach: a target it has passed and still owes. What the queue puts first and the case page shows.

Two kinds, each read from what the store holds, not kept as a state of its own:
- **An SLA clock** whose timer fell due before the clock was met (the sweep fired it at its due time: status
  ``done``), while what it measures is still owed: the first response, while no analyst has answered; the reply to
  the customer, while no analyst has written since the message the customer waits on; the resolution, while the
  case is not resolved. A response clock is not owed while another team has the case (``waiting_on_internal``),
  as it stops running then.
- **A promise** that fell due unkept (``missed``) and that the analyst has not written about since its due time.

A breach ends when what it measures is met (late), and is then history: the SLA metrics
(``vigil_sla_breaches_total``) and the audit keep it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.cases import progress, timers
from vigil.cases.states import State
from vigil.cases.tables import COMMITMENT, CONVERSATION, TIMER


@dataclass(frozen=True, slots=True)
class Breach:
    """A target a case passed and still owes: ``kind`` is an SLA clock or ``commitment`` (``ref`` its id)."""

    kind: str
    due_at: datetime
    ref: str | None = None


def _clock_owed(c: Any, t: Any) -> sa.ColumnElement[bool]:
    responding = c.state != State.WAITING_ON_INTERNAL.value
    unanswered_since = sa.or_(c.last_analyst_at.is_(None), c.last_analyst_at < t.started_at)
    return sa.and_(
        t.status == timers.DONE,
        sa.or_(
            sa.and_(t.kind == timers.FIRST_RESPONSE, c.first_response_at.is_(None), responding),
            sa.and_(t.kind == timers.NEXT_RESPONSE, unanswered_since, responding),
            sa.and_(t.kind == timers.RESOLUTION, c.state.not_in([State.RESOLVED.value, State.CLOSED.value])),
        ),
    )


def _promise_owed(c: Any, m: Any) -> sa.ColumnElement[bool]:
    return sa.and_(
        m.status == progress.MISSED,
        m.due_at.is_not(None),
        sa.or_(c.last_analyst_at.is_(None), c.last_analyst_at < m.due_at),
    )


def first(c: Any = CONVERSATION.c) -> sa.ColumnElement[Any]:
    """When the conversation ``c`` (a row of a query) first passed a target it still owes; NULL when it owes none.
    For ordering: those in breach longest first."""
    t, m = TIMER.c, COMMITMENT.c
    clock = (
        sa.select(sa.func.min(t.due_at))
        .where(t.conversation_id == c.id, t.kind.in_(timers.CLOCKS), _clock_owed(c, t))
        .scalar_subquery()
    )
    promise = sa.select(sa.func.min(m.due_at)).where(m.conversation_id == c.id, _promise_owed(c, m)).scalar_subquery()
    # The earlier of the two, either of which may be NULL (SQLite's min() of NULL is NULL, PostgreSQL's LEAST skips it).
    return sa.case((clock.is_(None), promise), (promise.is_(None), clock), (clock <= promise, clock), else_=promise)


async def of(conn: AsyncConnection, conversation_ids: Sequence[str]) -> dict[str, list[Breach]]:
    """The targets each of these conversations has passed and still owes, oldest first."""
    found: dict[str, list[Breach]] = {i: [] for i in conversation_ids}
    if not conversation_ids:
        return found
    c, t, m = CONVERSATION.c, TIMER.c, COMMITMENT.c
    ids = list(conversation_ids)
    clocks = (
        sa.select(t.conversation_id, t.kind, t.due_at, sa.null().label("ref"))
        .join(CONVERSATION, c.id == t.conversation_id)
        .where(t.conversation_id.in_(ids), t.kind.in_(timers.CLOCKS), _clock_owed(c, t))
    )
    promises = (
        sa.select(
            m.conversation_id, sa.literal(timers.COMMITMENT).label("kind"), m.due_at, m.commitment_id.label("ref")
        )
        .join(CONVERSATION, c.id == m.conversation_id)
        .where(m.conversation_id.in_(ids), _promise_owed(c, m))
    )
    for stmt in (clocks, promises):
        for row in await conn.execute(stmt):
            found[row.conversation_id].append(Breach(kind=row.kind, due_at=row.due_at, ref=row.ref))
    for breaches in found.values():
        breaches.sort(key=lambda b: (b.due_at, b.kind, b.ref or ""))
    return found
