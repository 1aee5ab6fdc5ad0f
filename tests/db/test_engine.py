"""The engine: on SQLite, connections are kept, not opened per read, and work that checks a connection out again
and again keeps the one it just returned; a transaction's time limit tells the database being slow from vigil's own
work being slow."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from vigil.core.errors import Overrun, StoreUnavailable
from vigil.db.engine import create_engine, guarded


async def test_on_sqlite_each_checkout_gets_the_connection_just_returned(tmp_path: Path):
    # Each SQLite connection has its own page cache, which another connection's commit makes stale: a writer handed
    # the pool's connections in turn re-reads its pages on every batch.
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'v.db'}", pool_size=5, data_dir=tmp_path)
    try:
        several = [await engine.connect().start() for _ in range(3)]  # as start-up's concurrent work leaves them
        for conn in several:
            await conn.close()
        used = []
        for _ in range(4):
            async with engine.connect() as conn:
                used.append((await conn.get_raw_connection()).dbapi_connection)
        assert all(c is used[0] for c in used)
    finally:
        await engine.dispose()


async def test_concurrent_sqlite_readers_share_the_pools_connections_instead_of_opening_more(tmp_path: Path):
    # Each aiosqlite connection is a thread and a file opened with pragmas: opened per read, under load, they cost
    # more than the reads.
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'vigil.db'}", pool_size=5, data_dir=tmp_path)
    opened: list[object] = []
    sa.event.listen(engine.sync_engine, "connect", lambda connection, record: opened.append(connection))

    async def read() -> int:
        async with engine.connect() as conn:
            await asyncio.sleep(0.01)  # held a moment, so that the readers overlap
            return int(await conn.scalar(sa.text("SELECT 1")) or 0)

    try:
        for _ in range(3):
            assert await asyncio.gather(*(read() for _ in range(40))) == [1] * 40
        assert 1 <= len(opened) <= 8
    finally:
        await engine.dispose()


async def test_a_transaction_that_outruns_its_time_on_vigils_own_work_is_an_overrun_not_the_database(tmp_path: Path):
    # A 59 KB message's sentiment, scored inside a skill's transaction, timed out there: it was reported as "the
    # database is unavailable" and retried, taking as long each time.
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'v.db'}", pool_size=1, data_dir=tmp_path)
    try:
        with pytest.raises(Overrun, match="vigil's own"):
            async with guarded(engine, timeout_s=0.2, begin=True) as conn:
                started = time.thread_time()
                while time.thread_time() - started < 0.3:  # the event loop's own work, not the database's
                    pass
                await conn.execute(sa.text("SELECT 1"))
    finally:
        await engine.dispose()


async def test_a_database_that_does_not_answer_in_time_is_unavailable(tmp_path: Path):
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'v.db'}", pool_size=1, data_dir=tmp_path)
    try:
        with pytest.raises(StoreUnavailable, match="unavailable"):
            async with guarded(engine, timeout_s=0.2, begin=True) as conn:
                await conn.execute(sa.text("SELECT 1"))
                await asyncio.sleep(0.3)  # waiting, as on a database that does not answer
    finally:
        await engine.dispose()
