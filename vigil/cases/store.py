"""The case store: conversations, messages, case events, suggestions and feedback in SQL.

SQLite (WAL) by default, PostgreSQL in production, through SQLAlchemy's async engine. Events are written in
group-committed batches: each caller of ``record`` waits until its event is durably committed, while events from
many conversations share one transaction. Schema changes go through Alembic (``vigil/db/migrations``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from vigil.app.settings import Settings
from vigil.cases import paging
from vigil.cases import writes as cases
from vigil.cases.writes import CASE_EVENT, CONVERSATION, FEEDBACK, MESSAGE, case_state
from vigil.core.clock import Clock
from vigil.core.errors import EventConflict, SettingsError, StoreError, StoreUnavailable
from vigil.db.tables import ReadMark, SuggestionRow
from vigil.flow.case import Recorded
from vigil.wire.events import Event, SourceRef, Suggestion

log = logging.getLogger(__name__)

SUGGESTION = SuggestionRow.__table__  # type: ignore[attr-defined]
READ_MARK = ReadMark.__table__  # type: ignore[attr-defined]
SUPPORTED_DIALECTS = ("sqlite", "postgresql")


class MessageView(BaseModel):
    """A stored message, as the API shows it."""

    message_id: str
    sent_at: datetime
    role: str
    author: str | None
    text: str
    metadata: dict[str, Any] | None


class ConversationSummary(BaseModel):
    """A conversation in a list: its state, without the messages."""

    conversation_id: str
    tenant: str
    status: str
    assignee: str | None
    priority: str | None
    opened_at: datetime
    updated_at: datetime
    message_count: int


PREVIEW_CHARS = 140
"""How much of the last message a queue row shows."""


class MessagePreview(BaseModel):
    """The start of a conversation's last message, for a queue row."""

    role: str
    text: str
    """The text with its whitespace run together, cut to ``PREVIEW_CHARS`` characters, with "…" if it was cut."""
    sent_at: datetime


class QueueItem(ConversationSummary):
    """A live conversation in an analyst's queue."""

    customer_name: str | None
    """The author of the latest customer message that names one; None if none does."""
    last_message: MessagePreview | None
    """The conversation's last message (in stream order); None before the first."""

    waiting_since: datetime | None
    """When the customer's unanswered message came; None if the analyst has replied since."""
    unread_suggestions: list[str]
    """Suggestions out since the reader last read the conversation and not judged by anyone yet, oldest first."""


class FeedbackView(BaseModel):
    """An analyst's verdict on a suggestion."""

    feedback_id: str
    suggestion_id: str
    verdict: str
    by: str | None
    at: datetime
    text: str | None


class ConversationView(ConversationSummary):
    """A page of a conversation: its newest messages and suggestions (or those before a cursor), newest first, the
    latest verdict on each of those suggestions, and the cursor of the page before."""

    closed_at: datetime | None
    waiting_since: datetime | None
    messages: list[MessageView]
    """At most a page, newest first (stream order, reversed)."""
    suggestions: list[Suggestion]
    """At most a page, newest first."""
    feedback: list[FeedbackView]
    """The latest verdict on each suggestion of the page, oldest first."""
    older: str | None
    """The cursor of the page before this one (pass it as ``before``); None when this page reaches the start."""


@dataclass(slots=True)
class _Pending:
    event: Event
    received_at: datetime
    done: asyncio.Future[Recorded] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


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
    engine = create_async_engine(url, hide_parameters=True, connect_args={"timeout": 30})

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


class CaseStore:
    """vigil's state in SQL; the one module that talks to the database."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        clock: Clock,
        default_tenant: str,
        batch_max_events: int = 256,
        timeout_s: float = 5.0,
        future_skew_s: float = 86400.0,
    ) -> None:
        self.engine = engine
        self._clock = clock
        self._default_tenant = default_tenant
        self._batch_max = batch_max_events
        self._timeout_s = timeout_s
        self._future_skew = timedelta(seconds=future_skew_s)
        self._queue: list[_Pending] = []
        self._wake = asyncio.Event()
        self._flusher: asyncio.Task[None] | None = None

    @classmethod
    def from_settings(cls, settings: Settings, *, clock: Clock) -> CaseStore:
        """Build the store the settings describe (the database is not contacted yet)."""
        engine = create_engine(settings.database_url, pool_size=settings.database.pool_size, data_dir=settings.data_dir)
        return cls(
            engine,
            clock=clock,
            default_tenant=settings.default_tenant,
            batch_max_events=settings.database.batch_max_events,
            timeout_s=settings.database.timeout_s,
            future_skew_s=settings.ingest.future_skew_s,
        )

    async def migrate(self) -> None:
        """Bring the schema to the newest migration (safe to run from several replicas at once)."""
        try:
            async with self.engine.begin() as conn:
                await conn.run_sync(_upgrade)
        except Exception as exc:
            if is_unavailable(exc):
                raise StoreUnavailable(f"cannot migrate the database: {exc}") from exc
            raise StoreError(f"migration failed: {exc}") from exc

    async def ping(self) -> None:
        """Check that the database answers, within the store's timeout."""
        try:
            async with asyncio.timeout(self._timeout_s), self.engine.connect() as conn:
                await conn.execute(sa.text("SELECT 1"))
        except Exception as exc:
            raise StoreUnavailable(f"database unreachable: {exc}") from exc

    async def record(self, event: Event) -> Recorded:
        """Store an event and apply it to its case; returns once it is committed.

        Raises:
            StoreUnavailable: the database could not be reached (retry).
            EventConflict: the event contradicts the stored case (do not retry).
            StoreError: the database refused the event (do not retry).
        """
        pending = _Pending(event, self._clock.now())
        self._queue.append(pending)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_forever(), name="vigil-store-flusher")
        self._wake.set()
        return await pending.done

    async def _flush_forever(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                batch, self._queue = self._queue[: self._batch_max], self._queue[self._batch_max :]
                await self._write(batch)

    async def _write(self, batch: list[_Pending]) -> None:
        try:
            async with asyncio.timeout(self._timeout_s), _connected(self.engine) as conn, conn.begin():
                results = await cases.record_batch(
                    conn,
                    [(p.event, p.received_at) for p in batch],
                    self._default_tenant,
                    future_skew=self._future_skew,
                )
        except Exception as exc:
            if is_unavailable(exc):
                _fail(batch, StoreUnavailable(f"database unavailable: {describe(exc)}"), exc)
            elif len(batch) > 1:
                for pending in batch:  # find the one that failed; the others go through on their own
                    await self._write([pending])
            else:
                _fail(batch, exc if isinstance(exc, EventConflict) else StoreError(f"refused: {describe(exc)}"), exc)
            return
        for pending, result in zip(batch, results, strict=True):
            if not pending.done.done():
                pending.done.set_result(result)

    async def save_suggestion(self, suggestion: Suggestion) -> None:
        """Store a suggestion before it is published (idempotent by ``suggestion_id``)."""
        row = suggestion.model_dump(exclude={"type", "schema_version"}, mode="json")
        row |= {"created_at": suggestion.created_at, "published_at": None}
        async with self._transaction() as conn:
            await conn.execute(cases.upsert(conn, SUGGESTION).values(row).on_conflict_do_nothing())

    async def mark_published(self, suggestion_ids: list[str]) -> None:
        """Record that these suggestions are out on every sink."""
        if not suggestion_ids:
            return
        stmt = (
            sa.update(SUGGESTION)
            .where(SUGGESTION.c.suggestion_id.in_(suggestion_ids))
            .values(published_at=self._clock.now())
        )
        async with self._transaction() as conn:
            await conn.execute(stmt)

    async def unpublished_replies(self, conversation_id: str, event_id: str) -> list[Suggestion]:
        """Suggestions made in reply to an event that were stored but never published (a crash in between)."""
        stmt = (
            sa.select(SUGGESTION)
            .where(
                SUGGESTION.c.conversation_id == conversation_id,
                SUGGESTION.c.in_reply_to == event_id,
                SUGGESTION.c.published_at.is_(None),
            )
            .order_by(SUGGESTION.c.created_at)
        )
        async with self._transaction() as conn:
            rows = (await conn.execute(stmt)).all()
        return [_suggestion(row) for row in rows]

    async def recent_suggestions(self, conversation_id: str, limit: int = 20) -> list[Suggestion]:
        """The conversation's latest suggestions, newest first (for dedupe and cooldown)."""
        stmt = (
            sa.select(SUGGESTION)
            .where(SUGGESTION.c.conversation_id == conversation_id)
            .order_by(SUGGESTION.c.created_at.desc())
            .limit(limit)
        )
        async with self._transaction() as conn:
            rows = (await conn.execute(stmt)).all()
        return [_suggestion(row) for row in rows]

    async def conversation(
        self,
        conversation_id: str,
        *,
        tenants: Sequence[str] | None = None,
        limit: int = paging.DEFAULT_PAGE,
        before: str | None = None,
    ) -> ConversationView | None:
        """A page of a conversation: up to ``limit`` of its messages and of its suggestions, newest first, from the
        start or from the ``before`` cursor of a page read earlier, with the verdicts on those suggestions; None if
        there is none of ``tenants`` (None: any) by that id.

        Raises:
            InvalidCursor: ``before`` is not a cursor a page gave.
        """
        position = paging.Position.decode(before)
        limit = max(1, min(limit, paging.MAX_PAGE))
        head_stmt = sa.select(CONVERSATION).where(CONVERSATION.c.id == conversation_id)
        if tenants is not None:
            head_stmt = head_stmt.where(CONVERSATION.c.tenant.in_(list(tenants)))
        async with self._transaction() as conn:
            head = (await conn.execute(head_stmt)).first()
            if head is None:
                return None
            messages, suggestions = [], []
            if not position.messages_done:
                messages = list(
                    (await conn.execute(paging.messages_page(MESSAGE, conversation_id, position, limit))).all()
                )
            if not position.suggestions_done:
                page = paging.suggestions_page(SUGGESTION, conversation_id, position, limit)
                suggestions = list((await conn.execute(page)).all())
            older, messages, suggestions = paging.next_position(position, messages, suggestions, limit)
            ids = [s.suggestion_id for s in suggestions]
            feedback = (await conn.execute(paging.latest_verdicts(FEEDBACK, conversation_id, ids))).all() if ids else []
        return ConversationView(
            **_summary(head).model_dump(),
            closed_at=head.closed_at,
            waiting_since=case_state(head).waiting_since,
            messages=[MessageView.model_validate(dict(m._mapping)) for m in messages],
            suggestions=[_suggestion(s) for s in suggestions],
            feedback=[FeedbackView.model_validate(dict(f._mapping)) for f in feedback],
            older=older.encode(),
        )

    async def suggestion(self, suggestion_id: str) -> Suggestion | None:
        """One suggestion by id, or None."""
        stmt = sa.select(SUGGESTION).where(SUGGESTION.c.suggestion_id == suggestion_id)
        async with self._transaction() as conn:
            row = (await conn.execute(stmt)).first()
        return _suggestion(row) if row is not None else None

    async def recent_conversations(
        self, limit: int = 50, *, tenants: Sequence[str] | None = None
    ) -> list[ConversationSummary]:
        """The most recently active conversations of ``tenants`` (None: all), newest first."""
        c = CONVERSATION.c
        stmt = sa.select(CONVERSATION).order_by(c.updated_at.desc(), c.id).limit(limit)
        if tenants is not None:
            stmt = stmt.where(c.tenant.in_(list(tenants)))
        async with self._transaction() as conn:
            rows = (await conn.execute(stmt)).all()
        return [_summary(row) for row in rows]

    async def queue(self, *, tenants: Sequence[str] | None, reader: str | None, limit: int = 200) -> list[QueueItem]:
        """Open conversations of ``tenants`` (None: all): those waiting longest first, then the most recent; with
        the suggestions that are unread to ``reader`` (None: every suggestion nobody has judged)."""
        c, s, r = CONVERSATION.c, SUGGESTION.c, READ_MARK.c
        # CaseState.waiting_since in SQL, so that the limit keeps those who have waited longest.
        unanswered = sa.or_(c.last_analyst_at.is_(None), c.last_analyst_at < c.last_customer_at)
        waiting_since = sa.case((sa.and_(c.last_customer_at.is_not(None), unanswered), c.last_customer_at))
        stmt = (
            sa.select(CONVERSATION)
            .where(c.status != "closed")
            .order_by(waiting_since.is_(None), waiting_since, c.updated_at.desc(), c.id)
            .limit(limit)
        )
        if tenants is not None:
            stmt = stmt.where(c.tenant.in_(list(tenants)))
        async with self._transaction() as conn:
            rows = (await conn.execute(stmt)).all()
            judged = sa.select(FEEDBACK.c.suggestion_id).where(FEEDBACK.c.suggestion_id == s.suggestion_id).exists()
            unread_stmt = (
                sa.select(s.conversation_id, s.suggestion_id)
                .where(s.conversation_id.in_([row.id for row in rows]), s.published_at.is_not(None), ~judged)
                .order_by(s.created_at, s.suggestion_id)
            )
            if reader is not None:
                read_at = (
                    sa.select(r.read_at)
                    .where(r.reader == reader, r.conversation_id == s.conversation_id)
                    .scalar_subquery()
                )
                unread_stmt = unread_stmt.where(sa.or_(read_at.is_(None), s.created_at > read_at))
            unread: dict[str, list[str]] = {row.id: [] for row in rows}
            for conversation_id, suggestion_id in (await conn.execute(unread_stmt)).all():
                unread[conversation_id].append(suggestion_id)
            latest = {m.conversation_id: m for m in (await conn.execute(_latest_messages([row.id for row in rows])))}
        return [
            QueueItem(
                **_summary(row).model_dump(),
                waiting_since=case_state(row).waiting_since,
                unread_suggestions=unread[row.id],
                customer_name=latest[row.id].customer_name if row.id in latest else None,
                last_message=_preview(latest[row.id]) if row.id in latest else None,
            )
            for row in rows
        ]

    async def mark_read(
        self, reader: str, conversation_id: str, at: datetime, *, tenants: Sequence[str] | None
    ) -> bool:
        """``reader`` has read ``conversation_id`` up to ``at``: suggestions made until then are no longer unread
        to them (made, not published: the panel shows a suggestion before its publication is recorded). A mark never
        moves back. False, and nothing marked, if the conversation is not one of ``tenants``' (None: all)."""
        c = CONVERSATION.c
        visible = sa.select(c.id).where(c.id == conversation_id)
        if tenants is not None:
            visible = visible.where(c.tenant.in_(list(tenants)))
        row = {"reader": reader, "conversation_id": conversation_id, "read_at": at}
        async with self._transaction() as conn:
            if await conn.scalar(visible) is None:
                return False
            insert = cases.upsert(conn, READ_MARK).values(row)
            await conn.execute(
                insert.on_conflict_do_update(
                    index_elements=[READ_MARK.c.reader, READ_MARK.c.conversation_id],
                    set_={"read_at": insert.excluded.read_at},
                    where=READ_MARK.c.read_at < insert.excluded.read_at,
                )
            )
        return True

    async def count_events(self) -> dict[str, int]:
        """How many messages, case events and conversations are stored."""
        async with self._transaction() as conn:
            counts = {}
            for name, table in (
                ("conversations", CONVERSATION),
                ("messages", MESSAGE),
                ("case_events", CASE_EVENT),
            ):
                counts[name] = int(await conn.scalar(sa.select(sa.func.count()).select_from(table)) or 0)
        return counts

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[AsyncConnection]:
        """A connection for reads (rolled back at the end) within the store's timeout; errors come out as vigil's.

        Raises:
            StoreUnavailable: the database could not be reached, or the reads took longer than the timeout.
            StoreError: the database refused a query.
        """
        async with self._guarded(begin=False) as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def writing(self) -> AsyncIterator[AsyncConnection]:
        """One transaction (committed at the end) within the store's timeout, for the panel's own small tables;
        errors come out as vigil's, as from ``reading``."""
        async with self._transaction() as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def _transaction(self) -> AsyncIterator[AsyncConnection]:
        """One transaction with the store's timeout; database errors come out as vigil's."""
        async with self._guarded(begin=True) as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def _guarded(self, *, begin: bool) -> AsyncIterator[AsyncConnection]:
        try:
            async with asyncio.timeout(self._timeout_s), _connected(self.engine) as conn:
                if not begin:
                    yield conn
                    return
                async with conn.begin():
                    yield conn
        except StoreError:
            raise
        except Exception as exc:
            raise _translate(exc) from exc

    async def close(self) -> None:
        """Stop the writer (failing what is still queued) and close the database connections."""
        if self._flusher is not None:
            self._flusher.cancel()
            await asyncio.gather(self._flusher, return_exceptions=True)
        _fail(self._queue, StoreUnavailable("the store is closed"), None)
        self._queue = []
        await self.engine.dispose()


@contextlib.asynccontextmanager
async def _connected(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A connection from the pool; failing to get one is "unavailable" whatever the server said.

    A server that turns connections away (starting up, not accepting connections, a role at its connection limit)
    answers with a SQLSTATE that would mean a refusal on a statement; the event is not at fault then.
    """
    conn = engine.connect()
    try:
        await conn.start()
    except Exception as exc:
        raise StoreUnavailable(f"cannot connect to the database: {describe(exc)}") from exc
    try:
        yield conn
    finally:
        await conn.close()


def _translate(exc: BaseException) -> StoreError:
    if isinstance(exc, StoreError):
        return exc
    if is_unavailable(exc):
        return StoreUnavailable(f"database unavailable: {describe(exc)}")
    return StoreError(f"database error: {describe(exc)}")


def _fail(batch: list[_Pending], error: Exception, cause: BaseException | None) -> None:
    error.__cause__ = cause
    for pending in batch:
        if not pending.done.done():
            pending.done.set_exception(error)


def _summary(row: sa.Row[Any]) -> ConversationSummary:
    return ConversationSummary.model_validate({**row._mapping, "conversation_id": row.id})


def _latest_messages(conversation_ids: list[str]) -> sa.Select[Any]:
    """Per conversation of ``conversation_ids``: its last message (role, time, the start of its text) and the
    author of its latest customer message that has one. Each is found by a ``max(seq)`` per conversation, which
    both databases answer by reading from the end of an index: (conversation_id, seq) for the last message, and a
    partial one over the customer messages that name their author for the name, so a long conversation costs no
    more than a short one, even when its customer never gives a name; only ``PREVIEW_CHARS + 1`` characters of a
    text leave the database (the one over tells that it was cut)."""
    m, c = MESSAGE.c, CONVERSATION.c
    last, named = MESSAGE.alias("last"), MESSAGE.alias("named")
    last_seq = sa.select(sa.func.max(m.seq)).where(m.conversation_id == c.id).scalar_subquery()
    named_seq = (
        sa.select(sa.func.max(m.seq))
        .where(m.conversation_id == c.id, m.role == "customer", m.author.is_not(None))
        .scalar_subquery()
    )
    return (
        sa.select(
            c.id.label("conversation_id"),
            last.c.role,
            last.c.sent_at,
            sa.func.substr(last.c.text, 1, PREVIEW_CHARS + 1).label("text"),
            named.c.author.label("customer_name"),
        )
        .select_from(
            CONVERSATION.join(last, sa.and_(last.c.conversation_id == c.id, last.c.seq == last_seq)).outerjoin(
                named, sa.and_(named.c.conversation_id == c.id, named.c.seq == named_seq)
            )
        )
        .where(c.id.in_(conversation_ids))
    )


def _preview(row: sa.Row[Any]) -> MessagePreview:
    """A last message as a queue row shows it: whitespace run together, cut on a character (not a byte)."""
    text = " ".join(row.text[:PREVIEW_CHARS].split())
    return MessagePreview(
        role=row.role, text=f"{text}…" if len(row.text) > PREVIEW_CHARS else text, sent_at=row.sent_at
    )


def _suggestion(row: sa.Row[Any]) -> Suggestion:
    m = dict(row._mapping)
    m["sources"] = [SourceRef.model_validate(s) for s in m["sources"]]
    m.pop("published_at", None)
    return Suggestion.model_validate(m)


def _upgrade(connection: sa.Connection) -> None:
    config = Config()
    config.set_main_option("script_location", str(resources.files("vigil.db") / "migrations"))
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
