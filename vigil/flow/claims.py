"""The SQL that makes a durable job run once per window: a ``job_claim`` row per (job, due time).

A window's row is inserted with the dialect's insert-or-ignore, by every replica that expects it (ahead of time, so
that a restart finds it due) or reaches it; then one conditional UPDATE gives it to the first replica that asks
while nobody holds it, or once its holder's lease has run out. The job id per window is arq's ``cron(unique=True)``
idea; the lease is what lets another replica take over from one that died mid-run.

Times come from the scheduler's clock, not the database's, so simulated time works the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vigil.db.engine import upsert
from vigil.flow.tables import JOB_CLAIM


@dataclass(frozen=True, slots=True)
class Claim:
    """The answer to a claim: ``won``, or held by another replica until ``held_until`` (None: already done)."""

    won: bool
    held_until: datetime | None = None


def _insert_or_ignore(conn: AsyncConnection) -> Any:
    return upsert(conn, JOB_CLAIM).on_conflict_do_nothing()


def _window(job: str, due_at: datetime) -> sa.ColumnElement[bool]:
    return sa.and_(JOB_CLAIM.c.job == job, JOB_CLAIM.c.due_at == due_at)


async def expect(engine: AsyncEngine, job: str, due_at: datetime) -> None:
    """Store that ``job`` is due at ``due_at`` (a no-op if that window is stored already)."""
    async with engine.begin() as conn:
        await conn.execute(_insert_or_ignore(conn).values(job=job, due_at=due_at))


async def claim(
    engine: AsyncEngine, job: str, due_at: datetime, *, owner: str, now: datetime, lease: timedelta
) -> Claim:
    """Take the window (``job``, ``due_at``) for ``owner`` until ``now + lease``, unless another holds it or ran it."""
    async with engine.begin() as conn:
        await conn.execute(_insert_or_ignore(conn).values(job=job, due_at=due_at))
        free = sa.or_(JOB_CLAIM.c.owner.is_(None), JOB_CLAIM.c.lease_until <= now)
        taken = await conn.execute(
            sa.update(JOB_CLAIM)
            .where(_window(job, due_at), JOB_CLAIM.c.finished_at.is_(None), free)
            .values(owner=owner, claimed_at=now, lease_until=now + lease)
        )
        if taken.rowcount == 1:
            return Claim(won=True)
        row = (
            await conn.execute(sa.select(JOB_CLAIM.c.finished_at, JOB_CLAIM.c.lease_until).where(_window(job, due_at)))
        ).one()
    return Claim(won=False, held_until=None if row.finished_at is not None else row.lease_until)


async def renew(
    engine: AsyncEngine, job: str, due_at: datetime, *, owner: str, now: datetime, lease: timedelta
) -> bool:
    """Extend ``owner``'s lease on a window it is running to ``now + lease``; False if the window is no longer its."""
    async with engine.begin() as conn:
        renewed = await conn.execute(
            sa.update(JOB_CLAIM)
            .where(_window(job, due_at), JOB_CLAIM.c.owner == owner, JOB_CLAIM.c.finished_at.is_(None))
            .values(lease_until=now + lease)
        )
    return renewed.rowcount == 1


async def finish(
    engine: AsyncEngine, job: str, due_at: datetime, *, owner: str, outcome: str, now: datetime, keep_from: datetime
) -> bool:
    """Close ``owner``'s claim on a window with its outcome, and forget the job's windows due before ``keep_from``.

    Returns False if the claim was no longer ``owner``'s (its lease expired and another replica took the window).
    """
    async with engine.begin() as conn:
        closed = await conn.execute(
            sa.update(JOB_CLAIM)
            .where(_window(job, due_at), JOB_CLAIM.c.owner == owner)
            .values(finished_at=now, outcome=outcome, lease_until=None)
        )
        await conn.execute(sa.delete(JOB_CLAIM).where(JOB_CLAIM.c.job == job, JOB_CLAIM.c.due_at < keep_from))
    return closed.rowcount == 1


async def missed(engine: AsyncEngine, job: str, now: datetime) -> datetime | None:
    """The due time of ``job``'s latest stored window at or before ``now``, if that window has not run."""
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                sa.select(JOB_CLAIM.c.due_at, JOB_CLAIM.c.finished_at)
                .where(JOB_CLAIM.c.job == job, JOB_CLAIM.c.due_at <= now)
                .order_by(JOB_CLAIM.c.due_at.desc())
                .limit(1)
            )
        ).first()
    if row is None or row.finished_at is not None:
        return None
    due_at: datetime = row.due_at
    return due_at
