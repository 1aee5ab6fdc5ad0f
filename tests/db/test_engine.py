"""The engine: SQLite's connections are kept, not opened per read."""

from __future__ import annotations

import asyncio
from pathlib import Path

import sqlalchemy as sa

from vigil.db.engine import create_engine


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
