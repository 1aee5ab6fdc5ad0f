"""The lock per customer on SQLite and PostgreSQL: two transactions for one customer run one after the other, the
second seeing what the first wrote; on PostgreSQL two customers' transactions do not wait for each other; a lock
is let go when its transaction fails."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from tests.cases.test_actions import record
from vigil.cases import actions
from vigil.cases.locks import customer_locked
from vigil.cases.store import CaseStore
from vigil.core.errors import StoreError

T0 = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
WAIT_S = 0.5
"""How long a transaction that should be waiting is watched (long enough to see it would not have waited)."""


async def _holding(store: CaseStore, customer: str, held: asyncio.Event, release: asyncio.Event) -> None:
    """Take ``customer``'s lock, store a refund for them, and keep the transaction open until ``release``."""
    async with customer_locked(store.engine, "acme", customer, at=T0, timeout_s=30) as conn:
        await actions.insert(conn, record("c-first", customer=customer))
        held.set()
        await release.wait()


async def _refunds_seen(store: CaseStore, customer: str, took: asyncio.Event) -> int:
    """Take ``customer``'s lock, then count their refunds (what a guard would read under it)."""
    async with customer_locked(store.engine, "acme", customer, at=T0, timeout_s=30) as conn:
        took.set()
        rows = await actions.history(conn, "acme", customer, since=T0, statuses=("suggested",))
        await actions.insert(conn, record("c-second", customer=customer))
        return len(rows)


async def test_two_transactions_for_one_customer_run_one_after_the_other(store: CaseStore):
    held, release, took = asyncio.Event(), asyncio.Event(), asyncio.Event()
    first = asyncio.create_task(_holding(store, "CUS-1", held, release))
    await asyncio.wait_for(held.wait(), 10)
    second = asyncio.create_task(_refunds_seen(store, "CUS-1", took))
    await asyncio.sleep(WAIT_S)
    assert not took.is_set(), "the second transaction took the customer's lock while the first held it"
    release.set()
    await first
    assert await asyncio.wait_for(second, 10) == 1  # it saw the first's refund, committed before it went on


async def test_the_lock_is_let_go_when_its_transaction_fails(store: CaseStore):
    with pytest.raises(StoreError):
        async with customer_locked(store.engine, "acme", "CUS-1", at=T0, timeout_s=30) as conn:
            await conn.execute(sa.text("SELECT * FROM no_such_table"))
    took = asyncio.Event()
    assert await asyncio.wait_for(_refunds_seen(store, "CUS-1", took), 10) == 0


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
async def test_on_postgresql_a_transaction_without_a_customer_takes_no_lock(store: CaseStore):
    held, release = asyncio.Event(), asyncio.Event()
    first = asyncio.create_task(_holding(store, "CUS-1", held, release))
    await asyncio.wait_for(held.wait(), 10)
    try:
        async with customer_locked(store.engine, "acme", None, at=T0, timeout_s=WAIT_S) as conn:
            assert await actions.history(conn, "acme", "CUS-2", since=T0, statuses=("suggested",)) == []
    finally:
        release.set()
        await first


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
async def test_on_postgresql_two_customers_do_not_wait_for_each_other(store: CaseStore):
    held, release, took = asyncio.Event(), asyncio.Event(), asyncio.Event()
    first = asyncio.create_task(_holding(store, "CUS-1", held, release))
    await asyncio.wait_for(held.wait(), 10)
    try:
        assert await asyncio.wait_for(_refunds_seen(store, "CUS-2", took), WAIT_S) == 0
    finally:
        release.set()
        await first
