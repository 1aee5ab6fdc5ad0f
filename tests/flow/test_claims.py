"""Claims on a durable job's windows, on both databases: one holder per window, a lease, a record of what ran."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from vigil.cases.store import CaseStore
from vigil.flow import claims
from vigil.flow.claims import Claim
from vigil.flow.tables import JOB_CLAIM

DUE = datetime(2026, 11, 2, 9, 10, tzinfo=UTC)
LEASE = timedelta(seconds=120)


async def test_a_window_goes_to_the_first_replica_that_claims_it(store: CaseStore):
    first = await claims.claim(store.engine, "miner", DUE, owner="a", now=DUE, lease=LEASE)
    second = await claims.claim(store.engine, "miner", DUE, owner="b", now=DUE + timedelta(seconds=1), lease=LEASE)
    assert first == Claim(won=True)
    assert second == Claim(won=False, held_until=DUE + LEASE)
    # Another job's window at the same time is its own.
    assert (await claims.claim(store.engine, "sweep", DUE, owner="b", now=DUE, lease=LEASE)).won


async def test_another_replica_takes_a_window_when_its_holders_lease_runs_out(store: CaseStore):
    await claims.claim(store.engine, "miner", DUE, owner="a", now=DUE, lease=LEASE)
    early = await claims.claim(
        store.engine, "miner", DUE, owner="b", now=DUE + LEASE - timedelta(seconds=1), lease=LEASE
    )
    taken = await claims.claim(store.engine, "miner", DUE, owner="b", now=DUE + LEASE, lease=LEASE)
    assert (early.won, taken.won) == (False, True)
    # The first holder, back from the dead, can no longer close the window; its new holder can.
    later = DUE + 2 * LEASE
    assert not await claims.finish(store.engine, "miner", DUE, owner="a", outcome="ran", now=later, keep_from=DUE)
    assert await claims.finish(store.engine, "miner", DUE, owner="b", outcome="ran", now=later, keep_from=DUE)


async def test_a_window_that_ran_is_never_claimed_again_however_late(store: CaseStore):
    await claims.claim(store.engine, "miner", DUE, owner="a", now=DUE, lease=LEASE)
    await claims.finish(store.engine, "miner", DUE, owner="a", outcome="failed", now=DUE, keep_from=DUE)
    again = await claims.claim(store.engine, "miner", DUE, owner="b", now=DUE + timedelta(days=1), lease=LEASE)
    assert again == Claim(won=False, held_until=None)
    async with store.engine.connect() as conn:
        row = (await conn.execute(sa.select(JOB_CLAIM))).one()
    assert (row.owner, row.outcome, row.finished_at) == ("a", "failed", DUE)


async def test_an_expected_window_is_missed_until_it_has_run(store: CaseStore):
    await claims.expect(store.engine, "report", DUE)
    await claims.expect(store.engine, "report", DUE)  # every replica expects it; one row
    assert await claims.missed(store.engine, "report", DUE - timedelta(seconds=1)) is None
    assert await claims.missed(store.engine, "report", DUE + timedelta(days=2)) == DUE
    assert await claims.missed(store.engine, "sweep", DUE + timedelta(days=2)) is None
    await claims.claim(store.engine, "report", DUE, owner="a", now=DUE + timedelta(days=2), lease=LEASE)
    await claims.finish(store.engine, "report", DUE, owner="a", outcome="ran", now=DUE, keep_from=DUE)
    assert await claims.missed(store.engine, "report", DUE + timedelta(days=2)) is None


async def test_closing_a_window_forgets_the_jobs_windows_before_the_kept_ones(store: CaseStore):
    for hours in range(4):
        await claims.expect(store.engine, "miner", DUE + timedelta(hours=hours))
    await claims.expect(store.engine, "sweep", DUE)
    last = DUE + timedelta(hours=3)
    await claims.claim(store.engine, "miner", last, owner="a", now=last, lease=LEASE)
    keep_from = DUE + timedelta(hours=2)
    await claims.finish(store.engine, "miner", last, owner="a", outcome="ran", now=last, keep_from=keep_from)
    async with store.engine.connect() as conn:
        rows = (await conn.execute(sa.select(JOB_CLAIM.c.job, JOB_CLAIM.c.due_at).order_by(JOB_CLAIM.c.due_at))).all()
    assert sorted((job, due) for job, due in rows) == [("miner", keep_from), ("miner", last), ("sweep", DUE)]


async def test_a_holder_renews_its_lease_while_the_window_is_its_own(store: CaseStore):
    await claims.claim(store.engine, "miner", DUE, owner="a", now=DUE, lease=LEASE)
    later = DUE + timedelta(seconds=100)
    assert await claims.renew(store.engine, "miner", DUE, owner="a", now=later, lease=LEASE)
    assert not await claims.renew(store.engine, "miner", DUE, owner="b", now=later, lease=LEASE)
    held = await claims.claim(store.engine, "miner", DUE, owner="b", now=DUE + LEASE, lease=LEASE)
    assert held == Claim(won=False, held_until=later + LEASE)
    await claims.finish(store.engine, "miner", DUE, owner="a", outcome="ran", now=later, keep_from=DUE)
    assert not await claims.renew(store.engine, "miner", DUE, owner="a", now=later, lease=LEASE)
