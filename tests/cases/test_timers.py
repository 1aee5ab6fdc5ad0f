"""Durable timers on SQLite and PostgreSQL: armed idempotently, claimed by one holder at a time, taken over when a
holder dies mid-fire, moved on only by their holder."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from tests.cases.test_store import pg_store  # noqa: F401  (a fixture)
from vigil.cases import timers
from vigil.cases.store import CaseStore
from vigil.cases.tables import TIMER
from vigil.cases.timers import Arm

T0 = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)


def arm(timer_id: str = "t-1", due_min: float = 10, warn_min: float | None = 8) -> Arm:
    return Arm(
        timer_id=timer_id,
        conversation_id="c-1",
        tenant="acme",
        kind="first_response",
        started_at=T0,
        due_at=T0 + timedelta(minutes=due_min),
        warn_at=T0 + timedelta(minutes=warn_min) if warn_min is not None else None,
    )


def minutes(n: float) -> datetime:
    return T0 + timedelta(minutes=n)


async def armed(store: CaseStore, *arms: Arm) -> None:
    async with store.engine.begin() as conn:
        await timers.arm(conn, list(arms))


async def claim(store: CaseStore, *, now: datetime, owner: str, lease: timedelta) -> list[timers.Timer]:
    async with store.engine.begin() as conn:
        return await timers.claim_due(conn, now=now, owner=owner, lease=lease)


async def running(store: CaseStore) -> list[timers.Timer]:
    async with store.engine.connect() as conn:
        return await timers.running(conn, "c-1")


async def test_a_timer_fires_at_its_warning_then_at_its_due_time_then_is_done(store: CaseStore):
    await armed(store, arm())
    assert await claim(store, now=minutes(7.9), owner="a", lease=LEASE) == []
    (warning,) = await claim(store, now=minutes(8), owner="a", lease=LEASE)
    assert warning.stage == timers.WARN and warning.fire_at == minutes(8)
    async with store.engine.begin() as conn:
        assert await timers.advance(conn, warning, owner="a", now=minutes(8))
    assert await claim(store, now=minutes(9), owner="a", lease=LEASE) == []
    (due,) = await claim(store, now=minutes(10), owner="a", lease=LEASE)
    assert due.stage == timers.DUE
    async with store.engine.begin() as conn:
        assert await timers.advance(conn, due, owner="a", now=minutes(10))
    assert await running(store) == []


async def test_arming_again_with_the_same_due_time_changes_nothing_and_another_starts_it_over(store: CaseStore):
    await armed(store, arm())
    (warning,) = await claim(store, now=minutes(8), owner="a", lease=LEASE)
    async with store.engine.begin() as conn:
        await timers.advance(conn, warning, owner="a", now=minutes(8))
    await armed(store, arm())  # every event re-arms what should run: the warning is not given twice
    (same,) = await running(store)
    assert same.stage == timers.DUE
    await armed(store, arm(due_min=30, warn_min=28))
    (again,) = await running(store)
    assert (again.stage, again.fire_at, again.due_at) == (timers.WARN, minutes(28), minutes(30))


async def test_a_cancelled_timer_armed_again_runs_again(store: CaseStore):
    await armed(store, arm("t-1"), arm("t-2"))
    async with store.engine.begin() as conn:
        assert await timers.cancel(conn, "c-1", keep=["t-2"]) == 1
    assert [t.timer_id for t in await running(store)] == ["t-2"]
    await armed(store, arm("t-1"))
    assert sorted(t.timer_id for t in await running(store)) == ["t-1", "t-2"]


async def test_a_warning_after_the_due_time_is_dropped(store: CaseStore):
    await armed(store, arm(due_min=10, warn_min=12))
    (only,) = await running(store)
    assert only.warn_at is None and only.stage == timers.DUE and only.fire_at == minutes(10)


async def test_a_timer_is_claimed_by_one_holder_and_taken_over_when_its_lease_ends(store: CaseStore):
    await armed(store, arm())
    (taken,) = await claim(store, now=minutes(8), owner="a", lease=LEASE)
    assert await claim(store, now=minutes(8), owner="b", lease=LEASE) == []
    # "a" dies before moving it on; once its lease ends, "b" fires it.
    (again,) = await claim(store, now=minutes(8) + LEASE, owner="b", lease=LEASE)
    assert again.timer_id == taken.timer_id and again.stage == timers.WARN
    async with store.engine.begin() as conn:
        assert not await timers.advance(conn, taken, owner="a", now=minutes(9))  # too late: no longer a's
        assert await timers.advance(conn, again, owner="b", now=minutes(9))


async def test_a_timer_rearmed_while_it_fires_is_not_moved_on_by_its_old_holder(store: CaseStore):
    await armed(store, arm())
    (taken,) = await claim(store, now=minutes(8), owner="a", lease=LEASE)
    await armed(store, arm(due_min=40, warn_min=38))  # a new wait started meanwhile
    async with store.engine.begin() as conn:
        assert not await timers.advance(conn, taken, owner="a", now=minutes(8))
    (fresh,) = await running(store)
    assert fresh.fire_at == minutes(38) and fresh.stage == timers.WARN


async def test_the_next_moment_a_timer_fires_is_known(store: CaseStore):
    await armed(store, arm("t-1", 10, 8), arm("t-2", 5, None))
    assert await timers.next_fire_at(store.engine, T0) == minutes(5)
    assert await timers.next_fire_at(store.engine, minutes(5)) == minutes(8)
    assert await timers.next_fire_at(store.engine, minutes(8)) is None


async def test_on_postgresql_a_timer_another_transaction_has_locked_is_skipped_not_waited_for(
    pg_store: CaseStore,  # noqa: F811
):
    await armed(pg_store, arm("t-1", 5, None), arm("t-2", 6, None))
    async with pg_store.engine.connect() as holding:
        await holding.begin()
        await holding.execute(  # an event re-arming its case's timer, its transaction still open
            sa.update(TIMER).where(TIMER.c.timer_id == "t-1").values(priority="high")
        )
        taken = await asyncio.wait_for(claim(pg_store, now=minutes(10), owner="a", lease=LEASE), timeout=5)
        assert [t.timer_id for t in taken] == ["t-2"]
        await holding.rollback()
    assert [t.timer_id for t in await claim(pg_store, now=minutes(10), owner="b", lease=LEASE)] == ["t-1"]
