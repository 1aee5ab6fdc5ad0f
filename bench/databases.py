"""A fresh, empty database for each run: a SQLite file in a temp dir, or a random-named PostgreSQL database."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import sqlalchemy as sa

PG_ADMIN = os.environ.get("VIGIL_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
KINDS = ("sqlite", "postgresql")


@contextlib.contextmanager
def fresh(kind: str, workdir: Path) -> Iterator[str]:
    """Yield the SQLAlchemy async URL of a new database of ``kind``; remove it afterwards."""
    if kind == "sqlite":
        path = workdir / "vigil.db"
        try:
            yield f"sqlite+aiosqlite:///{path}"
        finally:
            for leftover in workdir.glob("vigil.db*"):
                leftover.unlink()
        return
    if kind != "postgresql":
        raise ValueError(f"unknown database kind {kind!r}; use one of {KINDS}")
    name = f"vigil_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield sa.make_url(PG_ADMIN).set(drivername="postgresql+asyncpg", database=name).render_as_string(False)
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def plain_url(url: str) -> str:
    """What a synchronous client opens for an async URL: a ``postgresql://`` URL, or the SQLite file's path."""
    parsed = sa.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return str(parsed.database)
    return parsed.set(drivername="postgresql").render_as_string(False)


def stored_events(url: str) -> int:
    """How many messages and case events the database holds."""
    query = "SELECT (SELECT count(*) FROM message) + (SELECT count(*) FROM case_event)"
    if sa.make_url(url).get_backend_name() == "sqlite":
        with contextlib.closing(sqlite3.connect(plain_url(url))) as conn:
            return int(conn.execute(query).fetchone()[0])
    with psycopg.connect(plain_url(url)) as conn:
        row = conn.execute(query).fetchone()
        return int(row[0]) if row else 0
