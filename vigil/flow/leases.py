"""A named lease: one holder at a time, across replicas and processes, of work that must not run twice at once
whoever starts it (the miner, from its scheduled job on any replica or from ``vigil mine --once``).

A durable job's window (vigil/flow/claims.py) makes a job run once per window; it does not keep a run started some
other way from overlapping it. A lease does: one row per name, taken with one conditional UPDATE while nobody holds
it or its holder's time has run out, extended as the work goes on, and freed at the end. The holder proves it still
holds the lease inside the very transaction that writes its results (``hold``), so a holder that stalled past its
time, and whose lease another has taken, writes nothing: its transaction rolls back with ``LeaseLost`` (fencing).

Times come from the caller's clock, as the scheduler's do, so simulated time works the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vigil.core.clock import Clock
from vigil.core.errors import LeaseLost
from vigil.db.engine import upsert
from vigil.flow.tables import LEASE


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a lease, and until when (unless they renew it)."""

    owner: str
    until: datetime


class Lease:
    """The lease ``name`` for ``owner``: ``take`` it, ``hold`` it in each transaction that writes the work's
    results (which also extends it by ``duration_s``), ``free`` it at the end."""

    def __init__(self, engine: AsyncEngine, name: str, *, owner: str, clock: Clock, duration_s: float) -> None:
        if duration_s <= 0:
            raise ValueError(f"lease {name!r}: duration_s must be positive")
        self.name = name
        self.owner = owner
        self._engine = engine
        self._clock = clock
        self._duration = timedelta(seconds=duration_s)

    async def take(self) -> Holder | None:
        """Take the lease (None), unless it is held (by another, or by this owner for another run): then who holds
        it, and until when."""
        now = self._clock.now()
        async with self._engine.begin() as conn:
            await conn.execute(upsert(conn, LEASE).on_conflict_do_nothing(), {"name": self.name})
            free = sa.or_(LEASE.c.owner.is_(None), LEASE.c.held_until <= now)
            taken = await conn.execute(
                sa.update(LEASE)
                .where(LEASE.c.name == self.name, free)
                .values(owner=self.owner, held_until=now + self._duration)
            )
            if taken.rowcount == 1:
                return None
            row = (
                await conn.execute(sa.select(LEASE.c.owner, LEASE.c.held_until).where(LEASE.c.name == self.name))
            ).one()
        held_until: datetime = row.held_until
        return Holder(owner=row.owner, until=held_until)

    async def hold(self, conn: AsyncConnection) -> None:
        """In ``conn``'s transaction: extend the lease, or raise ``LeaseLost`` (rolling the transaction back) if it is
        no longer this owner's.

        Raises:
            LeaseLost: the lease ran out and another holder took it, or it was freed.
        """
        held = await conn.execute(
            sa.update(LEASE)
            .where(LEASE.c.name == self.name, LEASE.c.owner == self.owner)
            .values(held_until=self._clock.now() + self._duration)
        )
        if held.rowcount != 1:
            raise LeaseLost(self.name, self.owner)

    async def free(self) -> None:
        """Give the lease up (a no-op if another holds it now)."""
        async with self._engine.begin() as conn:
            await conn.execute(
                sa.update(LEASE)
                .where(LEASE.c.name == self.name, LEASE.c.owner == self.owner)
                .values(owner=None, held_until=None)
            )
