"""The engine: on SQLite, work that checks a connection out again and again keeps the one it just returned."""

from __future__ import annotations

from pathlib import Path

from vigil.db.engine import create_engine


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
