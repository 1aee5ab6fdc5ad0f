"""A named lease, on both databases: one holder at a time, taken over only once it runs out, and proved inside the
transaction that writes the work's results, so a holder that lost it writes nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from vigil.cases.store import CaseStore
from vigil.core.clock import ManualClock
from vigil.core.errors import LeaseLost
from vigil.flow.leases import Holder, Lease
from vigil.flow.tables import LEASE

START = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)
DURATION_S = 120.0


def lease(store: CaseStore, clock: ManualClock, owner: str, name: str = "miner") -> Lease:
    return Lease(store.engine, name, owner=owner, clock=clock, duration_s=DURATION_S)


async def test_one_holder_at_a_time_and_the_others_are_told_whose_it_is_and_until_when(store: CaseStore):
    clock = ManualClock(START)
    a, b = lease(store, clock, "a"), lease(store, clock, "b")
    assert await a.take() is None
    assert await b.take() == Holder(owner="a", until=START + timedelta(seconds=DURATION_S))
    # Not twice by one holder either: two runs in one process must not overlap.
    assert await a.take() == Holder(owner="a", until=START + timedelta(seconds=DURATION_S))
    # Another name is another lease.
    assert await lease(store, clock, "b", name="sweeper").take() is None


async def test_a_freed_lease_is_free_at_once(store: CaseStore):
    clock = ManualClock(START)
    a, b = lease(store, clock, "a"), lease(store, clock, "b")
    await a.take()
    await b.free()  # not b's to free: nothing happens
    assert await b.take() is not None
    await a.free()
    assert await b.take() is None


async def test_a_lease_passes_on_only_once_its_holder_stops_renewing_it(store: CaseStore):
    clock = ManualClock(START)
    a, b = lease(store, clock, "a"), lease(store, clock, "b")
    await a.take()
    clock.advance(DURATION_S - 1)
    async with store.engine.begin() as conn:  # a batch written: the lease extended with it
        await a.hold(conn)
    clock.advance(DURATION_S - 1)
    assert await b.take() is not None  # renewed: a's for another DURATION_S
    clock.advance(1)
    assert await b.take() is None
    with pytest.raises(LeaseLost):
        async with store.engine.begin() as conn:
            await a.hold(conn)


async def test_a_holder_that_lost_its_lease_writes_nothing_in_the_transaction_that_proves_it(store: CaseStore):
    clock = ManualClock(START)
    a, b = lease(store, clock, "a"), lease(store, clock, "b")
    await a.take()
    clock.advance(DURATION_S)
    await b.take()
    with pytest.raises(LeaseLost):
        async with store.engine.begin() as conn:
            await conn.execute(sa.insert(LEASE).values(name="written by a", owner="a"))
            await a.hold(conn)
    async with store.engine.connect() as conn:
        names = (await conn.execute(sa.select(LEASE.c.name))).scalars().all()
        owner = (await conn.execute(sa.select(LEASE.c.owner).where(LEASE.c.name == "miner"))).scalar_one()
    assert names == ["miner"]
    assert owner == "b"
