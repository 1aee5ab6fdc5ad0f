"""A case's durable timers: SLA targets and commitments' due times, stored so that they survive a restart and fire
once across replicas.

A timer has a due time and, before it, a warning time; it fires twice, once at each (``stage`` ``warn``, then
``due``), and is then ``done``. Arming it again with another due time starts it over; arming it with the same due
time changes nothing (so every event of a case may re-arm its timers), except that a cancelled timer runs again.

Firing is a claim, as the scheduler's windows are (vigil/flow/claims.py): every replica sweeps for the timers whose
``fire_at`` has come, and a conditional UPDATE gives each to one of them until ``lease_until``. The holder fires it
and moves it on (``advance``); one that dies mid-fire loses it when the lease ends and another replica fires it
(at least once: whatever a firing publishes must be keyed by the timer and stage, so that twice is the same as
once). Times come from the caller's clock, so simulated time works the same.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vigil.cases.tables import TIMER
from vigil.db.engine import insert

FIRST_RESPONSE = "first_response"
NEXT_RESPONSE = "next_response"
RESOLUTION = "resolution"
CLOCKS = (FIRST_RESPONSE, NEXT_RESPONSE, RESOLUTION)
"""The SLA clocks' kinds of timer (vigil/progress/sla.py arms them); a commitment's timer is the other kind."""
COMMITMENT = "commitment"

RUNNING = "running"
DONE = "done"
CANCELLED = "cancelled"
WARN = "warn"
DUE = "due"


@dataclass(frozen=True, slots=True)
class Timer:
    """A timer as stored, or as the sweep hands it out to fire."""

    timer_id: str
    conversation_id: str
    tenant: str
    kind: str
    ref: str | None
    priority: str | None
    started_at: datetime
    warn_at: datetime | None
    due_at: datetime
    stage: str
    fire_at: datetime
    status: str

    @classmethod
    def of(cls, row: sa.Row[Any]) -> Timer:
        m = row._mapping
        return cls(**{name: m[name] for name in cls.__slots__})


@dataclass(frozen=True, slots=True)
class Arm:
    """What to arm: a timer of a conversation due at ``due_at``, warned of at ``warn_at`` (None: no warning)."""

    timer_id: str
    conversation_id: str
    tenant: str
    kind: str
    started_at: datetime
    due_at: datetime
    warn_at: datetime | None = None
    ref: str | None = None
    priority: str | None = None


async def arm(conn: AsyncConnection, timers: Sequence[Arm]) -> None:
    """Store each timer, or start it over if it is stored with another due time or was cancelled."""
    if not timers:
        return
    rows = []
    for t in timers:
        warn = t.warn_at if t.warn_at is not None and t.warn_at < t.due_at else None
        rows.append(
            {
                "timer_id": t.timer_id,
                "conversation_id": t.conversation_id,
                "tenant": t.tenant,
                "kind": t.kind,
                "ref": t.ref,
                "priority": t.priority,
                "started_at": t.started_at,
                "warn_at": warn,
                "due_at": t.due_at,
                "stage": WARN if warn is not None else DUE,
                "fire_at": warn if warn is not None else t.due_at,
                "status": RUNNING,
            }
        )
    await conn.execute(_arm(conn.dialect.name), rows)


@functools.cache
def _arm(dialect: str) -> Any:
    """The upsert that arms timers, built once per dialect: a new one, or one whose due time moved or that was
    cancelled, (re)starts; one running to the same due time is left as it is."""
    stmt = insert(dialect, TIMER)
    new = stmt.excluded
    c = TIMER.c
    restart = sa.or_(c.due_at != new.due_at, c.status == CANCELLED)
    fields = ("ref", "priority", "started_at", "warn_at", "due_at", "stage", "fire_at", "status")
    return stmt.on_conflict_do_update(
        index_elements=[c.timer_id],
        set_={**{name: new[name] for name in fields}, "owner": None, "lease_until": None},
        where=restart,
    )


def _running_in(conversation_id: str) -> sa.ColumnElement[bool]:
    """The conversation's running timers: read through ``ix_timer_conversation_id_status``, which both its columns
    match (with the sweep's index on status alone a database without statistics read every running timer of every
    conversation, ~0.25 s per event with 100,000 of them: bench/timers.py)."""
    return sa.and_(TIMER.c.conversation_id == conversation_id, TIMER.c.status == RUNNING)


_CANCELLED = {"status": CANCELLED, "owner": None, "lease_until": None}


async def cancel(
    conn: AsyncConnection, conversation_id: str, *, kinds: Sequence[str] = (), keep: Sequence[str] = ()
) -> int:
    """Cancel the conversation's running timers (of ``kinds``, if given), but those of ``keep``; returns how many."""
    stmt = sa.update(TIMER).where(_running_in(conversation_id))
    if kinds:
        stmt = stmt.where(TIMER.c.kind.in_(list(kinds)))
    if keep:
        stmt = stmt.where(TIMER.c.timer_id.not_in(list(keep)))
    done = await conn.execute(stmt.values(_CANCELLED))
    return done.rowcount or 0


async def cancel_ids(conn: AsyncConnection, timer_ids: Sequence[str]) -> None:
    """Cancel these timers if they are running."""
    if timer_ids:
        await conn.execute(
            sa.update(TIMER).where(TIMER.c.timer_id.in_(list(timer_ids)), TIMER.c.status == RUNNING).values(_CANCELLED)
        )


async def cancel_in(conn: AsyncConnection, conversation_ids: Sequence[str]) -> None:
    """Cancel every running timer of these conversations (cases that closed)."""
    if conversation_ids:
        running = sa.and_(TIMER.c.conversation_id.in_(list(conversation_ids)), TIMER.c.status == RUNNING)
        await conn.execute(sa.update(TIMER).where(running).values(_CANCELLED))


@dataclass(frozen=True, slots=True)
class Running:
    """What the progress keeper needs of a running timer to re-arm a case's clocks."""

    timer_id: str
    kind: str
    due_at: datetime


_RUNNING_IN = sa.select(TIMER.c.conversation_id, TIMER.c.timer_id, TIMER.c.kind, TIMER.c.due_at).where(
    TIMER.c.conversation_id.in_(sa.bindparam("ids", expanding=True)), TIMER.c.status == RUNNING
)


async def running_in(conn: AsyncConnection, conversation_ids: Sequence[str]) -> dict[str, list[Running]]:
    """The running timers of each of these conversations (read through the same index as ``running``)."""
    found: dict[str, list[Running]] = {}
    if conversation_ids:
        for row in await conn.execute(_RUNNING_IN, {"ids": list(conversation_ids)}):
            found.setdefault(row.conversation_id, []).append(Running(row.timer_id, row.kind, row.due_at))
    return found


async def running(conn: AsyncConnection, conversation_id: str) -> list[Timer]:
    """The conversation's running timers, soonest due first."""
    rows = await conn.execute(
        sa.select(TIMER).where(_running_in(conversation_id)).order_by(TIMER.c.due_at, TIMER.c.timer_id)
    )
    return [Timer.of(row) for row in rows]


async def claim_due(
    conn: AsyncConnection, *, now: datetime, owner: str, lease: timedelta, limit: int = 500
) -> list[Timer]:
    """Take up to ``limit`` of the timers whose time has come and nobody holds, soonest first, for ``owner`` until
    ``now + lease``, in the caller's transaction. Another replica sweeping at the same moment takes others, or none:
    on PostgreSQL the rows another transaction has locked are skipped (``FOR UPDATE SKIP LOCKED``), never waited
    for, so two sweeps, or a sweep and an event re-arming its case's timers, cannot deadlock; SQLite has one writer."""
    free = sa.or_(TIMER.c.lease_until.is_(None), TIMER.c.lease_until <= now)
    candidates = (
        (
            await conn.execute(
                sa.select(TIMER.c.timer_id)
                .where(TIMER.c.status == RUNNING, TIMER.c.fire_at <= now, free)
                .order_by(TIMER.c.fire_at)
                .limit(limit)
                .with_for_update(skip_locked=True)
            )
        )
        .scalars()
        .all()
    )
    if not candidates:
        return []
    await conn.execute(
        sa.update(TIMER)
        .where(TIMER.c.timer_id.in_(candidates), TIMER.c.status == RUNNING, TIMER.c.fire_at <= now, free)
        .values(owner=owner, lease_until=now + lease)
    )
    taken = await conn.execute(
        sa.select(TIMER)
        .where(TIMER.c.timer_id.in_(candidates), TIMER.c.owner == owner, TIMER.c.lease_until == now + lease)
        .order_by(TIMER.c.fire_at)
    )
    return [Timer.of(row) for row in taken]


async def advance(conn: AsyncConnection, timer: Timer, *, owner: str, now: datetime) -> bool:
    """Move a timer ``owner`` has fired to its next stage (from the warning to its due time, or to ``done``) and
    let it go; False if it was no longer ``owner``'s (its lease ran out, or it was cancelled or re-armed)."""
    c = TIMER.c
    held = sa.and_(c.timer_id == timer.timer_id, c.owner == owner, c.status == RUNNING, c.stage == timer.stage)
    held = sa.and_(held, c.due_at == timer.due_at)
    if timer.stage == WARN:
        values: dict[str, Any] = {"stage": DUE, "fire_at": timer.due_at, "warned_at": now}
    else:
        values = {"status": DONE, "fired_at": now}
    moved = await conn.execute(sa.update(TIMER).where(held).values(owner=None, lease_until=None, **values))
    return moved.rowcount == 1


async def next_fire_at(engine: AsyncEngine, after: datetime) -> datetime | None:
    """When the next running timer fires, after ``after``: what a simulated clock moves to."""
    async with engine.connect() as conn:
        at: datetime | None = (
            await conn.execute(
                sa.select(sa.func.min(TIMER.c.fire_at)).where(TIMER.c.status == RUNNING, TIMER.c.fire_at > after)
            )
        ).scalar()
    return at
