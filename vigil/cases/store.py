"""The case store's write path: conversations, messages, case events, suggestions and feedback into SQL.

Events are written in group-committed batches: each caller of ``record`` waits until its event is durably committed,
while events from many conversations share one transaction, with what the keepers write for them
(vigil/flow/keeping.py). That the skills have finished with an event (``finished``) is noted in the next batch's
transaction, nobody waiting for it: a crash before then only shows the event to the skills once more. What the
panel and the API read of the cases is in ``vigil/cases/views.py``; the engine, the error boundary and migrations
in ``vigil/db/engine.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vigil.cases import writes as cases
from vigil.cases.tables import MESSAGE, SUGGESTION
from vigil.core.clock import Clock
from vigil.core.errors import EventConflict, Fenced, StoreError, StoreUnavailable
from vigil.db.engine import connected, describe, guarded, is_unavailable, migrate, open_engine, upsert
from vigil.db.settings import DatabaseSettings
from vigil.flow.case import Recorded
from vigil.flow.keeping import BatchKeeper, Keeper, Kept, keep_all
from vigil.flow.tenure import held, prove
from vigil.transport.base import Tenure
from vigil.wire.events import Event, SourceRef, Suggestion

log = logging.getLogger(__name__)

_ASKED = MESSAGE.alias("asked")
# Built once: an alias made per call builds its columns again and its cache key anew (a third of the loop's time
# in SQLAlchemy per question, bench/answer_path.py).
_EARLIER = (
    sa.select(SUGGESTION, _ASKED.c.text.label("asked_text"))
    .select_from(
        SUGGESTION.outerjoin(
            _ASKED,
            sa.and_(
                _ASKED.c.conversation_id == SUGGESTION.c.conversation_id,
                _ASKED.c.message_id == SUGGESTION.c.in_reply_to,
            ),
        )
    )
    .where(SUGGESTION.c.conversation_id == sa.bindparam("conversation_id"))
    .order_by(SUGGESTION.c.created_at.desc())
    .limit(sa.bindparam("limit"))
)


_MARKS_MAX = 4096
"""Finished marks written with one batch at most."""
MARKS_WAIT_S = 0.2
"""How long finished marks wait for a batch of events to go with before they are written on their own."""


@dataclass(frozen=True, slots=True)
class Earlier:
    """A suggestion made earlier in a conversation, and the text of the message it replied to (``None`` when it
    replied to a case event, or its message is not stored)."""

    suggestion: Suggestion
    asked: str | None


@dataclass(slots=True)
class _Pending:
    event: Event
    received_at: datetime
    tenure: Tenure | None
    done: asyncio.Future[Recorded] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class CaseStore:
    """The cases' write path: events recorded in group commits, and the suggestions made on them."""

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
        self._keepers: tuple[Keeper | BatchKeeper, ...] = ()
        self._finished: list[Event] = []  # marks waiting for the next batch
        self._closing = False  # set by close(): the writer ends once what is queued is written

    def keep_with(self, keepers: Sequence[Keeper | BatchKeeper]) -> None:
        """Have ``keepers`` write in the transaction of every new event from now on (``vigil.flow.keeping``)."""
        self._keepers = tuple(keepers)

    @classmethod
    def from_settings(
        cls,
        database: DatabaseSettings,
        *,
        data_dir: Path,
        clock: Clock,
        default_tenant: str,
        future_skew_s: float,
    ) -> CaseStore:
        """Build the store the database section describes (the database is not contacted yet).

        Args:
            database: ``VIGIL_DATABASE__*``.
            data_dir: where SQLite lives unless ``database.url`` says otherwise.
            clock: the clock events are received by.
            default_tenant: the tenant of events that name none.
            future_skew_s: how far ahead of the clock an event's time may move its case.
        """
        return cls(
            open_engine(database, data_dir=data_dir),
            clock=clock,
            default_tenant=default_tenant,
            batch_max_events=database.batch_max_events,
            timeout_s=database.timeout_s,
            future_skew_s=future_skew_s,
        )

    @property
    def timeout_s(self) -> float:
        """How long one database round (a batch, a read) may take."""
        return self._timeout_s

    async def migrate(self) -> None:
        """Bring the schema to the newest migration (safe to run from several replicas at once)."""
        await migrate(self.engine)

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
            Fenced: the event's partition has moved to another consumer since it was read (nothing was written).
        """
        pending = _Pending(event, self._clock.now(), held())
        self._queue.append(pending)
        self._wake_flusher()
        return await pending.done

    def finished(self, event: Event) -> None:
        """Note, with the next batch, that the skills have finished with ``event`` (recorded earlier): a redelivery
        of it is then a plain duplicate. Returns at once; the note is lost if the process dies first."""
        self._finished.append(event)
        self._wake_flusher()

    def _wake_flusher(self) -> None:
        if self._flusher is None or self._flusher.done():
            # In a context of its own: not the one of the record whose event woke it (and its tenure).
            self._flusher = asyncio.create_task(
                self._flush_forever(), name="vigil-store-flusher", context=contextvars.Context()
            )
        self._wake.set()

    async def _flush_forever(self) -> None:
        while True:
            if self._closing and not self._queue:
                if self._finished:
                    await self._write([])  # a last try to note the events finished
                return
            if not self._queue and self._finished:
                # Marks ride with the next batch of events; they get a transaction of their own only if none comes.
                try:
                    async with asyncio.timeout(MARKS_WAIT_S):
                        await self._wake.wait()
                except TimeoutError:
                    await self._write([])
                    continue
            elif not self._queue:
                await self._wake.wait()
            self._wake.clear()
            while self._queue:
                batch, self._queue = self._queue[: self._batch_max], self._queue[self._batch_max :]
                await self._write(batch)

    async def _write(self, batch: list[_Pending]) -> None:
        # Bounded: each mark is two parameters of one statement, and a driver takes at most 32,767.
        marks, self._finished = self._finished[:_MARKS_MAX], self._finished[_MARKS_MAX:]
        try:
            async with asyncio.timeout(self._timeout_s), connected(self.engine) as conn, conn.begin():
                # The marks first: a redelivery in this very batch of an event just finished is then a plain duplicate.
                await cases.mark_finished(conn, marks, self._clock.now())
                results = await cases.record_batch(
                    conn,
                    [(p.event, p.received_at) for p in batch],
                    self._default_tenant,
                    future_skew=self._future_skew,
                )
                new = [Kept(p.event, r.case) for p, r in zip(batch, results, strict=True) if r.new]
                await keep_all(conn, self._keepers, new)
                await prove(conn, (p.tenure for p in batch))
        except Fenced as fenced:
            # Those read from a partition that has moved fail; the others are written without them.
            self._finished[:0] = marks
            kept: list[_Pending] = []
            refused: list[_Pending] = []
            for p in batch:
                fenced_off = p.tenure is not None and fenced.fences(p.tenure.scope, p.tenure.epoch)
                (refused if fenced_off else kept).append(p)
            _fail(refused, fenced, None)
            if kept:
                await self._write(kept)
            return
        except Exception as exc:
            self._finished[:0] = marks  # noted with the next batch that goes through
            if is_unavailable(exc):
                _fail(batch, StoreUnavailable(f"database unavailable: {describe(exc)}"), exc)
                if not batch:
                    await asyncio.sleep(min(1.0, self._timeout_s))  # only marks to write: not in a tight loop
            elif len(batch) > 1:
                for pending in batch:  # find the one that failed; the others go through on their own
                    await self._write([pending])
            elif batch:
                _fail(batch, exc if isinstance(exc, EventConflict) else StoreError(f"refused: {describe(exc)}"), exc)
            else:
                log.error("cannot note events finished: %s", describe(exc))
                self._finished = []  # refused: a redelivery shows them to the skills again, which is safe
            return
        for pending, result in zip(batch, results, strict=True):
            if not pending.done.done():
                pending.done.set_result(result)

    async def save_suggestion(self, suggestion: Suggestion) -> Suggestion | None:
        """Store a suggestion before it is published (idempotent by ``suggestion_id``), and return what to publish
        under its id: ``suggestion`` itself when the id is new; the copy stored earlier when the id was made before
        (a keyed suggestion said again, a job fired again after a crash) and is not out yet, so that one id never
        goes out with two contents; None when that copy is already published.

        Raises:
            Fenced: the suggestion is made for a record whose partition has moved to another consumer since.
        """
        row = suggestion.model_dump(exclude={"type", "schema_version"}, mode="json")
        row |= {"created_at": suggestion.created_at, "published_at": None}
        tenure = held()
        async with self._transaction() as conn:
            inserted = await conn.execute(upsert(conn, SUGGESTION).values(row).on_conflict_do_nothing())
            await prove(conn, (tenure,))
            if inserted.rowcount == 1:
                return suggestion
            stored = (
                await conn.execute(sa.select(SUGGESTION).where(SUGGESTION.c.suggestion_id == suggestion.suggestion_id))
            ).one()
        return None if stored.published_at is not None else suggestion_of(stored)

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
        return [suggestion_of(row) for row in rows]

    async def earlier_suggestions(self, conversation_id: str, limit: int = 20) -> list[Earlier]:
        """The conversation's latest suggestions, newest first, each with the text of the message it replied to:
        what the intervention policy compares a new question and a new answer with (repeats, same source)."""
        async with self._transaction() as conn:
            rows = (await conn.execute(_EARLIER, {"conversation_id": conversation_id, "limit": limit})).all()
        return [Earlier(suggestion_of(row), row.asked_text) for row in rows]

    @contextlib.asynccontextmanager
    async def _transaction(self) -> AsyncIterator[AsyncConnection]:
        """One transaction with the store's timeout; database errors come out as vigil's."""
        async with guarded(self.engine, timeout_s=self._timeout_s, begin=True) as conn:
            yield conn

    async def close(self) -> None:
        """Stop the writer (failing what is still queued, after a last try to note the events finished) and close
        the database connections."""
        self._closing = True
        if self._flusher is None or self._flusher.done():
            if self._finished:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(self._timeout_s):
                        await self._write([])
        else:
            # The writer ends once what it is writing is written: cancelled mid-transaction, its connection would be
            # reset under it (a traceback in the log, and the marks lost for nothing).
            self._wake.set()
            try:
                async with asyncio.timeout(self._timeout_s):
                    await asyncio.shield(self._flusher)
            except Exception:
                self._flusher.cancel()
                await asyncio.gather(self._flusher, return_exceptions=True)
        _fail(self._queue, StoreUnavailable("the store is closed"), None)
        self._queue = []
        await self.engine.dispose()


def _fail(batch: list[_Pending], error: Exception, cause: BaseException | None) -> None:
    error.__cause__ = cause
    for pending in batch:
        if not pending.done.done():
            pending.done.set_exception(error)


def suggestion_of(row: sa.Row[Any]) -> Suggestion:
    """A stored suggestion row as the wire's ``Suggestion``."""
    m = {name: value for name, value in row._mapping.items() if name in Suggestion.model_fields}
    m["sources"] = [SourceRef.model_validate(s) for s in m["sources"]]
    return Suggestion.model_validate(m)
