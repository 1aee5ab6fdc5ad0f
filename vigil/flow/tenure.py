"""Tenures: fencing the consumer a partition has moved away from, so that the old owner stops before the new one
starts even when it does not know it is the old owner.

Kafka gives each partition to one member of the group at a time, and a member hands its partitions over at a
rebalance: it finishes (or withdraws) what is in flight first. A member can still go on after the group has moved on
without it: stalled past its session (a long pause, a frozen VM) or cut off from the broker, it wakes with records in
flight and has not been told yet. Its writes must then be refused. Each time any consumer is given a partition, it
counts the partition's epoch up in the database (``SqlTenures.take``) before it hands out any of the partition's
records; each record carries the tenure it was read under (``Record.tenure``), the ingest holds it while the record is
handled (``holding``), and the writes that make an event's effects (the case store's batch, a suggestion) prove it in
their own transaction (``prove``), which fails with ``Fenced`` and writes nothing once a later tenure exists.

The proof reads the partition's row last in the transaction, after the writes: on PostgreSQL ``FOR SHARE``, so that a
new tenure taken meanwhile waits for the transaction to commit, or is seen and refuses it; on SQLite the transaction
already holds the database's write lock there. Either way a write either commits before the new tenure is taken or
not at all. Effects outside the database (publishing, a connector's call) are not fenced this way: publishing follows
a stored suggestion and the stored copy is what goes out, and an action's call is claimed in the database first.

The daemon keeps tenures on PostgreSQL, which replicas share (vigil/app/compose.py): on SQLite there is one process.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterable, Iterator
from contextvars import ContextVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vigil.core.clock import Clock
from vigil.core.errors import Fenced
from vigil.db.engine import guarded, upsert
from vigil.flow.tables import TENURE
from vigil.transport.base import Tenure

_held: ContextVar[Tenure | None] = ContextVar("vigil_tenure", default=None)


@contextlib.contextmanager
def holding(tenure: Tenure | None) -> Iterator[None]:
    """Handle what follows (in this task, and the tasks it starts) under ``tenure``: the writes made for it prove it."""
    token = _held.set(tenure)
    try:
        yield
    finally:
        _held.reset(token)


def held() -> Tenure | None:
    """The tenure the current record is handled under (None: not a record from a partition, or no tenures kept)."""
    return _held.get()


async def prove(conn: AsyncConnection, tenures: Iterable[Tenure | None]) -> None:
    """In ``conn``'s transaction, after its writes: check that each of ``tenures`` is still its partition's latest.

    Raises:
        Fenced: a later tenure of one of them exists (the transaction must roll back).
    """
    wanted: dict[str, int] = {}  # the oldest epoch of each partition among them
    for tenure in tenures:
        if tenure is not None:
            wanted[tenure.scope] = min(tenure.epoch, wanted.get(tenure.scope, tenure.epoch))
    if not wanted:
        return
    latest = await conn.execute(
        sa.select(TENURE.c.scope, TENURE.c.epoch).where(TENURE.c.scope.in_(wanted)).with_for_update(read=True)
    )
    moved = {scope: epoch for scope, epoch in latest if epoch > wanted[scope]}
    if moved:
        raise Fenced(moved)


class SqlTenures:
    """The tenure book in the database (``tenure`` table), for the Kafka source: ``take`` when given partitions."""

    def __init__(self, engine: AsyncEngine, *, holder: str, clock: Clock, timeout_s: float) -> None:
        self._engine = engine
        self._holder = holder
        self._clock = clock
        self._timeout_s = timeout_s

    async def take(self, scopes: Collection[str]) -> dict[str, Tenure]:
        """A new tenure of each of ``scopes`` for this holder: its epoch counted up, fencing off the earlier ones.

        Raises:
            StoreUnavailable: the database cannot be reached (retry).
        """
        scopes = sorted(set(scopes))  # in one order on every replica: two taking at once do not deadlock
        now = self._clock.now()
        async with guarded(self._engine, timeout_s=self._timeout_s, begin=True) as conn:
            await conn.execute(upsert(conn, TENURE).on_conflict_do_nothing(), [{"scope": s} for s in scopes])
            await conn.execute(
                sa.update(TENURE)
                .where(TENURE.c.scope.in_(scopes))
                .values(epoch=TENURE.c.epoch + 1, holder=self._holder, taken_at=now)
            )
            rows = await conn.execute(sa.select(TENURE.c.scope, TENURE.c.epoch).where(TENURE.c.scope.in_(scopes)))
            return {scope: Tenure(scope, epoch) for scope, epoch in rows}
