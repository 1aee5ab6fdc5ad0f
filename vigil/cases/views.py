"""What the panel and the API read of the cases: conversations a page at a time, the queue, read marks and counts.

The read side of the cases, apart from the write path (``vigil/cases/store.py``): it reads the tables the write path
fills, and writes only the analysts' read marks, which are theirs and not part of the case.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import sqlalchemy as sa
from pydantic import BaseModel, Field
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vigil.cases import actions, breaches, paging, progress, timers
from vigil.cases.actions import ActionRecord, AuditEntry
from vigil.cases.handover import Brief, brief
from vigil.cases.store import suggestion_of
from vigil.cases.tables import CASE_EVENT, CONVERSATION, FEEDBACK, MESSAGE, READ_MARK, SUGGESTION, TIMER
from vigil.cases.writes import case_state
from vigil.db.engine import guarded, upsert
from vigil.wire.events import Suggestion


class MessageView(BaseModel):
    """A stored message, as the API shows it."""

    message_id: str
    sent_at: datetime
    role: str
    author: str | None
    text: str
    metadata: dict[str, Any] | None


class TimerView(BaseModel):
    """A running timer: an SLA target, or a commitment's due time."""

    timer_id: str
    kind: str
    """``first_response``, ``next_response``, ``resolution`` or ``commitment``."""
    ref: str | None
    """For a commitment: its ``commitment_id``."""
    due_at: datetime
    warn_at: datetime | None
    """When vigil warns the analyst (a ``follow_up`` suggestion); None: no warning."""
    stage: str
    """``warn`` until the warning is out, then ``due``."""


class BreachView(BaseModel):
    """A target the case passed and still owes (vigil/cases/breaches.py)."""

    kind: str
    """The SLA clock (``first_response``, ``next_response``, ``resolution``) or ``commitment``."""
    due_at: datetime
    """When it fell due."""
    ref: str | None
    """For a commitment: its ``commitment_id``."""


class StateView(BaseModel):
    """Where the case stands (vigil/cases/states.py), since when, and its running timers, soonest due first."""

    status: str
    since: datetime
    timers: list[TimerView] = []


class CommitmentView(BaseModel):
    """Something the analyst promised the customer."""

    commitment_id: str
    message_id: str
    what: str
    due_at: datetime | None
    status: str
    """``open``, ``kept``, ``missed`` or ``cancelled``."""
    settled_at: datetime | None


class ActionView(BaseModel):
    """An action vigil suggested for the case: exactly what would run, where each argument came from, the rule
    behind its verdict, and where it stands."""

    action_id: str
    name: str
    arguments: dict[str, Any]
    arguments_hash: str
    """What an approval names (``POST /api/actions/{id}/approve``)."""
    provenance: dict[str, Any]
    verdict: str
    """``allow``, ``needs_approval``, ``deny`` (the policy's) or ``blocked`` (the conjunctive-risk guard's)."""
    rule: str
    reason: str
    approver: str | None
    status: str
    """``suggested`` (``waiting`` when its verdict is ``deny``: the conversation has a precondition to meet),
    ``approved``, ``rejected``, ``executing``, ``in_doubt`` (the system may have done it; the reconciler asks it
    again), ``executed``, ``failed``, ``expired``, or ``declined`` (the policy forbids it) and ``blocked`` (the
    guard), which never run (``vigil.actions.lifecycle``)."""
    amount_cents: int | None
    goodwill: bool
    suggestion_id: str | None
    suggested_at: datetime
    expires_at: datetime | None
    decided_by: str | None
    decided_at: datetime | None
    executed_at: datetime | None
    result: dict[str, Any] | None
    separate_from: list[str] | None = None
    """Whom the rule keeps from approving it, whatever their role: ``proposer``, ``reader`` (see ``handled_by``)."""
    handled_by: dict[str, list[str]] = Field(default_factory=dict)
    """Who handled it: ``proposer`` (the analyst who wrote last when it was decided), ``reader`` (who read it back)."""
    disguised: list[str] = Field(default_factory=list)
    """What disguised the customer's text it was asked for in (look-alike letters, invisible characters...): it was
    read as it looks, and only the strictest approver may approve it. Empty: nothing did."""


class ProgressView(BaseModel):
    """Where the case is in its procedure, and the customer's mood, as vigil last read them."""

    procedure: str | None
    step: str | None
    next_step: str | None
    next_reply: str | None
    sentiment: float | None
    """From -1 (angry) to 1 (happy), over the customer's recent messages."""
    chases: int
    """How many times the customer has chased ("any update?") since the analyst last wrote."""


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
    state: StateView


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
    breaches: list[BreachView] = []
    """The targets the case passed and still owes, oldest first: the queue puts these cases first."""
    next_due_at: datetime | None
    """When the case's first running timer falls due (the queue sorts by it next); None when none runs."""
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
    commitments: list[CommitmentView]
    """Every commitment of the case, in the order they were made."""
    breaches: list[BreachView] = []
    """The targets the case passed and still owes, oldest first."""
    actions: list[ActionView]
    """Every action suggested for the case, oldest first."""
    progress: ProgressView | None
    """None until vigil has read the case."""
    older: str | None
    """The cursor of the page before this one (pass it as ``before``); None when this page reaches the start."""


class CaseViews:
    """The cases as the panel and the API read them, within a timeout per read; errors come out as vigil's."""

    def __init__(self, engine: AsyncEngine, *, timeout_s: float) -> None:
        self.engine = engine
        self._timeout_s = timeout_s

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
            running = await timers.running(conn, conversation_id)
            promised = await progress.commitments(conn, conversation_id)
            owed = (await breaches.of(conn, [conversation_id]))[conversation_id]
            suggested = await actions.of_conversation(conn, conversation_id)
            read = await progress.reading(conn, conversation_id)
        summary = _summary(head)
        summary.state.timers = [TimerView.model_validate(t, from_attributes=True) for t in running]
        return ConversationView(
            **summary.model_dump(),
            closed_at=head.closed_at,
            waiting_since=case_state(head).waiting_since,
            messages=[MessageView.model_validate(dict(m._mapping)) for m in messages],
            suggestions=[suggestion_of(s) for s in suggestions],
            feedback=[FeedbackView.model_validate(dict(f._mapping)) for f in feedback],
            commitments=[CommitmentView.model_validate(c, from_attributes=True) for c in promised],
            breaches=[BreachView.model_validate(b, from_attributes=True) for b in owed],
            actions=[
                ActionView.model_validate(a, from_attributes=True).model_copy(
                    update={
                        "handled_by": dict(a.facts.get("_people") or {}),
                        "disguised": list((a.facts.get("_request") or {}).get("disguise") or []),
                    }
                )
                for a in suggested
            ],
            progress=ProgressView.model_validate(read, from_attributes=True) if read is not None else None,
            older=older.encode(),
        )

    async def handover(
        self, conversation_id: str, *, tenants: Sequence[str] | None = None, zone: ZoneInfo | None = None
    ) -> Brief | None:
        """The conversation's handover brief (times in its text in ``zone``, else UTC); None if there is none of
        ``tenants`` (None: any) by that id."""
        async with self._transaction() as conn:
            found = await brief(conn, conversation_id, zone=zone)
        if found is None or (tenants is not None and found.tenant not in tenants):
            return None
        return found

    async def audit(self, conversation_id: str, *, tenants: Sequence[str] | None = None) -> list[AuditEntry] | None:
        """The conversation's action audit log, in the order it was written; None if there is no conversation of
        ``tenants`` (None: any) by that id."""
        async with self._transaction() as conn:
            if not await self._visible(conn, conversation_id, tenants):
                return None
            return await actions.audit_log(conn, conversation_id)

    async def action(self, action_id: str, *, tenants: Sequence[str] | None = None) -> ActionRecord | None:
        """One action, or None if there is none of ``tenants`` (None: any) by that id."""
        async with self._transaction() as conn:
            found = await actions.get(conn, action_id)
        if found is None or (tenants is not None and found.tenant not in tenants):
            return None
        return found

    async def _visible(self, conn: AsyncConnection, conversation_id: str, tenants: Sequence[str] | None) -> bool:
        stmt = sa.select(CONVERSATION.c.id).where(CONVERSATION.c.id == conversation_id)
        if tenants is not None:
            stmt = stmt.where(CONVERSATION.c.tenant.in_(list(tenants)))
        return (await conn.execute(stmt)).first() is not None

    async def suggestion(self, suggestion_id: str) -> Suggestion | None:
        """One suggestion by id, or None."""
        stmt = sa.select(SUGGESTION).where(SUGGESTION.c.suggestion_id == suggestion_id)
        async with self._transaction() as conn:
            row = (await conn.execute(stmt)).first()
        return suggestion_of(row) if row is not None else None

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
        """Open conversations of ``tenants`` (None: all): those in breach first (the longest in breach first), then
        what falls due soonest, then those waiting longest, then the most recent; with the suggestions that are
        unread to ``reader`` (None: every suggestion nobody has judged)."""
        c, s, r = CONVERSATION.c, SUGGESTION.c, READ_MARK.c
        # CaseState.waiting_since in SQL, so that the limit keeps those who have waited longest.
        unanswered = sa.or_(c.last_analyst_at.is_(None), c.last_analyst_at < c.last_customer_at)
        waiting_since = sa.case((sa.and_(c.last_customer_at.is_not(None), unanswered), c.last_customer_at))
        t = TIMER.c
        next_due = (
            sa.select(sa.func.min(t.due_at))
            .where(t.conversation_id == c.id, t.status == timers.RUNNING)
            .scalar_subquery()
            .label("next_due_at")
        )
        breached = breaches.first(c)
        stmt = (
            sa.select(CONVERSATION, next_due)
            .where(c.status != "closed")
            .order_by(
                breached.is_(None),
                breached,
                next_due.is_(None),
                next_due,
                waiting_since.is_(None),
                waiting_since,
                c.updated_at.desc(),
                c.id,
            )
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
            owed = await breaches.of(conn, [row.id for row in rows])
        return [
            QueueItem(
                **_summary(row).model_dump(),
                waiting_since=case_state(row).waiting_since,
                breaches=[BreachView.model_validate(b, from_attributes=True) for b in owed[row.id]],
                next_due_at=row.next_due_at,
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
            insert = upsert(conn, READ_MARK).values(row)
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
        """A connection for reads (rolled back at the end) within the views' timeout; errors come out as vigil's.

        Raises:
            StoreUnavailable: the database could not be reached, or the reads took longer than the timeout.
            StoreError: the database refused a query.
        """
        async with guarded(self.engine, timeout_s=self._timeout_s, begin=False) as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def writing(self) -> AsyncIterator[AsyncConnection]:
        """One transaction (committed at the end) within the views' timeout, for the panel's own small tables;
        errors come out as vigil's, as from ``reading``."""
        async with guarded(self.engine, timeout_s=self._timeout_s, begin=True) as conn:
            yield conn

    def _transaction(self) -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
        """One transaction within the timeout (reads run in one too, to see one state of the tables)."""
        return guarded(self.engine, timeout_s=self._timeout_s, begin=True)


def _summary(row: sa.Row[Any]) -> ConversationSummary:
    state = StateView(status=row.state, since=row.state_since or row.opened_at)
    return ConversationSummary.model_validate({**row._mapping, "conversation_id": row.id, "state": state})


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
