"""A lock per (tenant, customer), held for the length of a transaction: what makes the conjunctive-risk guard's
read of a customer's actions and the write that follows from it (a new action, or one claimed for execution) one
step, so that two proposals or two approvals for one customer, in two pipelines or two replicas, see each other.

The lock is the customer's row in ``customer_lock``, upserted as the transaction's first statement:

- on PostgreSQL, ``INSERT … ON CONFLICT DO UPDATE`` leaves the row locked until the transaction commits or rolls
  back; a second transaction's upsert of the same row waits there, and one for another customer (another row) does
  not. The first upsert of a new customer is serialised by the primary key's index the same way. Every replica
  shares the database, so the lock holds across replicas and processes, and a process that dies mid-transaction
  drops its connection and with it the lock.
- on SQLite, the upsert is the transaction's first write, so it takes the database's one write lock (waiting up to
  the connection's ``busy_timeout``) before anything is read: every writer is serialised there anyway, and a
  transaction that read first and wrote later could not wait for the lock but would fail (``SQLITE_BUSY``).

Why a row and not ``pg_advisory_xact_lock``: one statement works on both databases (SQLite needs a write first
anyway), it needs no hash of the key into the advisory locks' 64-bit space (shared with every other user of the
server; ``hashtext`` refuses a key with a NUL byte), and a held lock shows in ``pg_locks`` against a named table.
It costs more on PostgreSQL: about 2 ms a transaction on a loaded 2-core machine against about 0.3 ms for the
advisory lock, and a row version per lock taken, which autovacuum reclaims; nothing measurable on SQLite
(``python -m bench.customer_lock``, docs/benchmarks.md). It is taken once per suggested action and once per claim,
each of which waits tens of milliseconds on the company's systems.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vigil.cases.tables import CUSTOMER_LOCK
from vigil.db.engine import guarded, upsert


async def lock_customer(conn: AsyncConnection, tenant: str, customer_id: str, *, at: datetime) -> None:
    """Hold ``(tenant, customer_id)``'s lock until ``conn``'s transaction ends; wait while another holds it.

    Take it before reading anything it guards: on SQLite it must be the transaction's first statement.
    """
    stmt = upsert(conn, CUSTOMER_LOCK).values(tenant=tenant, customer_id=customer_id, taken_at=at)
    await conn.execute(
        stmt.on_conflict_do_update(index_elements=["tenant", "customer_id"], set_={"taken_at": stmt.excluded.taken_at})
    )


@contextlib.asynccontextmanager
async def customer_locked(
    engine: AsyncEngine, tenant: str, customer_id: str | None, *, at: datetime, timeout_s: float | None
) -> AsyncIterator[AsyncConnection]:
    """A transaction (``vigil.db.engine.guarded``) that holds the customer's lock from its start, committed at the
    end; without a customer, a plain transaction (there is nothing of theirs to guard).

    Raises:
        StoreUnavailable: the database could not be reached, or the lock and the work took longer than
            ``timeout_s`` (another transaction held the lock that long).
        StoreError: the database refused a statement.
    """
    async with guarded(engine, timeout_s=timeout_s, begin=True) as conn:
        if customer_id is not None:
            await lock_customer(conn, tenant, customer_id, at=at)
        yield conn
