"""SQL plumbing every store shares: the engine, what a database error means, the error boundary, the dialect's
upsert and Alembic migrations.

SQLite (WAL) by default, PostgreSQL in production, through SQLAlchemy's async engine. Database errors leave this
module as vigil's (by default ``StoreUnavailable``: retry; ``StoreError``: refused; a store of its own, such as the
knowledge store, names its own classes), described without the SQL parameters or the
server's message, which may quote customer text.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from vigil.core.errors import Fenced, LeaseLost, Overrun, SettingsError, StoreError, StoreUnavailable, VigilError
from vigil.db.migrate import upgrade
from vigil.db.settings import DatabaseSettings

SUPPORTED_DIALECTS = ("sqlite", "postgresql")


def open_engine(settings: DatabaseSettings, *, data_dir: Path) -> AsyncEngine:
    """The engine the database settings describe (the database is not contacted yet)."""
    return create_engine(settings.url_in(data_dir), pool_size=settings.pool_size, data_dir=data_dir)


_SQLITE_POOL = 8
"""SQLite connections kept open at least: WAL lets them read at once while the one writer writes."""


def create_engine(url: str, *, pool_size: int, data_dir: Path, timeout_s: float = 5.0) -> AsyncEngine:
    """An async engine for a SQLite or PostgreSQL URL; SQLite runs in WAL mode."""
    dialect = sa.make_url(url).get_dialect().name
    if dialect not in SUPPORTED_DIALECTS:
        raise SettingsError("VIGIL_DATABASE__URL", f"unsupported database {dialect!r}; use SQLite or PostgreSQL")
    if dialect == "postgresql":
        return create_async_engine(
            url,
            pool_size=pool_size,
            pool_pre_ping=True,
            hide_parameters=True,  # the parameters are customer text: keep them out of errors and logs
            pool_recycle=1800,
            connect_args={"timeout": timeout_s, "command_timeout": timeout_s * 6},
        )
    database = sa.make_url(url).database
    folder = Path(database).parent if database and database != ":memory:" else data_dir
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        setting = "VIGIL_DATA_DIR" if folder == data_dir else "VIGIL_DATABASE__URL"
        raise SettingsError(setting, f"cannot create {folder}: {exc.strerror}") from exc
    # Every SQLite connection is a thread of aiosqlite's own, opened with the pragmas below. Connections beyond the
    # pool's size are opened and closed around each use, so under load (dozens of conversations reading at once) a
    # small pool meant a new thread and connection for most reads; readers wait for a pooled one instead.
    # LIFO: the case store's writer, which checks a connection out for every batch, gets the one it just returned,
    # whose page cache is current. In turn (FIFO), each batch met a cache another connection's commits had made
    # stale, and read its pages again.
    engine = create_async_engine(
        url,
        hide_parameters=True,
        connect_args={"timeout": 30},
        pool_size=max(pool_size, _SQLITE_POOL),
        max_overflow=0,
        pool_timeout=timeout_s * 6,
        pool_use_lifo=True,
    )

    @sa.event.listens_for(engine.sync_engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        # WAL with synchronous=NORMAL: a committed event survives a crash of vigil (not of the OS).
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=10000")
        cursor.close()

    return engine


# SQLSTATEs that mean "not now" rather than "never": connection exceptions (class 08), transaction rollbacks such
# as deadlocks and serialization failures (40), insufficient resources such as too many connections (53), operator
# intervention such as a statement timeout, an admin shutdown or a server starting up (57), and lock not available.
# Any other code (a constraint or data error, say) is the server refusing this event, which no retry would change.
TRANSIENT_SQLSTATE_CLASSES = frozenset({"08", "40", "53", "57"})
TRANSIENT_SQLSTATES = frozenset({"55P03"})


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a PostgreSQL error (asyncpg and psycopg both call it ``sqlstate``), if it has one."""
    orig = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
    code = getattr(orig, "sqlstate", None)
    return code if isinstance(code, str) and len(code) == 5 else None


def is_unavailable(exc: BaseException) -> bool:
    """Whether a database error means "not reachable now" (retry) rather than "refused" (do not)."""
    if isinstance(exc, StoreUnavailable | TimeoutError | OSError | sa.exc.TimeoutError):
        return True
    if isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated:
        return True
    code = sqlstate(exc)
    if code is not None:
        return code[:2] in TRANSIENT_SQLSTATE_CLASSES or code in TRANSIENT_SQLSTATES
    return isinstance(exc, sa.exc.OperationalError | sa.exc.InterfaceError)


def describe(exc: BaseException) -> str:
    """What a database error is, for logs and dead-letter headers: the driver's error class and its SQLSTATE (or
    SQLite's error name), never the SQL parameters or the server's message, which may quote customer text."""
    if isinstance(exc, StoreError):
        return str(exc)
    if not isinstance(exc, sa.exc.DBAPIError):
        return f"{type(exc).__name__}: {exc}"  # a socket or a timeout: no customer text in those
    orig = exc.orig
    cause = getattr(orig, "__cause__", None)
    driver = cause if isinstance(cause, Exception) else orig  # asyncpg's own error, under SQLAlchemy's adapter
    code = sqlstate(exc) or getattr(orig, "sqlite_errorname", None)
    return f"{type(driver).__name__} ({code})" if code else type(driver).__name__


def translate(
    exc: BaseException,
    *,
    unavailable: type[VigilError] = StoreUnavailable,
    refused: type[VigilError] = StoreError,
    what: str = "the database",
) -> VigilError:
    """vigil's error for a database error: ``unavailable`` if it may pass, else ``refused``; ``what`` names the
    database in the message."""
    if isinstance(exc, refused):
        return exc
    if is_unavailable(exc):
        return unavailable(f"{what} is unavailable: {describe(exc)}")
    return refused(f"{what} failed: {describe(exc)}")


@contextlib.asynccontextmanager
async def connected(
    engine: AsyncEngine,
    *,
    unavailable: type[VigilError] = StoreUnavailable,
    what: str = "the database",
) -> AsyncIterator[AsyncConnection]:
    """A connection from the pool; failing to get one is ``unavailable`` whatever the server said.

    A server that turns connections away (starting up, not accepting connections, a role at its connection limit)
    answers with a SQLSTATE that would mean a refusal on a statement; the event is not at fault then.
    """
    conn = engine.connect()
    try:
        await conn.start()
    except Exception as exc:
        raise unavailable(f"cannot connect to {what}: {describe(exc)}") from exc
    try:
        yield conn
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def guarded(
    engine: AsyncEngine,
    *,
    timeout_s: float | None,
    begin: bool,
    unavailable: type[VigilError] = StoreUnavailable,
    refused: type[VigilError] = StoreError,
    what: str = "the database",
) -> AsyncIterator[AsyncConnection]:
    """A connection within ``timeout_s`` (None: unbounded), in one transaction (committed at the end) with
    ``begin``, else rolled back at the end; database errors come out as vigil's, ``unavailable`` or ``refused``
    (``what`` names the database in their messages).

    A time limit that passes while the event loop's own thread was busy for most of it (vigil's work inside the
    block, or other work holding the loop) is ``Overrun``: the database was not what was slow, and asking again would
    only take as long.

    Raises:
        StoreUnavailable: (by default) the database could not be reached, or did not answer within ``timeout_s``.
        StoreError: (by default) the database refused a statement.
        Overrun: the time limit passed while vigil's own work held the event loop.
    """
    busy_from = time.thread_time()
    try:
        async with asyncio.timeout(timeout_s), connected(engine, unavailable=unavailable, what=what) as conn:
            if not begin:
                yield conn
                return
            async with conn.begin():
                yield conn
    except (refused, LeaseLost, Fenced):  # the caller's own verdict on its transaction, not the database's
        raise
    except TimeoutError as exc:
        busy = time.thread_time() - busy_from
        if timeout_s is not None and busy >= timeout_s * OWN_WORK_SHARE:
            raise Overrun(
                f"work on {what} took longer than {timeout_s:g}s, {busy:.2f}s of it vigil's own (not {what})"
            ) from exc
        raise translate(exc, unavailable=unavailable, refused=refused, what=what) from exc
    except Exception as exc:
        raise translate(exc, unavailable=unavailable, refused=refused, what=what) from exc


OWN_WORK_SHARE = 0.5
"""The share of a transaction's time limit the event loop's thread must have spent computing (not waiting) for a
timeout to be vigil's own overrun rather than the database being slow."""


def upsert(conn: AsyncConnection, table: sa.Table) -> Any:
    """The dialect's INSERT that knows ON CONFLICT (SQLite and PostgreSQL)."""
    return insert(conn.dialect.name, table)


def insert(dialect: str, table: sa.Table) -> Any:
    """The INSERT that knows ON CONFLICT of the dialect named ``dialect``."""
    return postgresql.insert(table) if dialect == "postgresql" else sqlite.insert(table)


async def migrate(engine: AsyncEngine) -> None:
    """Bring the schema to the newest migration (safe to run from several replicas at once).

    Raises:
        StoreUnavailable: the database could not be reached (retry).
        StoreError: a migration failed.
    """
    try:
        async with engine.begin() as conn:
            await conn.run_sync(upgrade)
    except Exception as exc:
        if is_unavailable(exc):
            raise StoreUnavailable(f"cannot migrate the database: {exc}") from exc
        raise StoreError(f"migration failed: {exc}") from exc
