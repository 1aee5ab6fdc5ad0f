"""The cases' SQL tables: conversations, their messages and case events, suggestions and feedback, and how far
each analyst has read a conversation (for the queue's unread suggestions).

A conversation's tenant lives on its ``conversation`` row only; messages, case events and feedback hang off it.
A conversation id names one conversation of one tenant (another tenant's event for it is refused), so the
conversation id and the event's own id together are the event's idempotency key: two conversations, of one tenant
or of two, may reuse a message, event or feedback id.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from vigil.db.schema import ID_LENGTH, seq, when


class Conversation(SQLModel, table=True):
    """One support case: the conversation and its state."""

    id: str = Field(primary_key=True, max_length=ID_LENGTH)
    tenant: str = Field(index=True, max_length=ID_LENGTH)
    status: str = Field(default="open", max_length=ID_LENGTH)
    """The platform's word for it (``open``, ``escalated``, ``closed`` or what a ``status`` event said)."""
    state: str = Field(default="new", max_length=32, sa_column_kwargs={"server_default": "new"})
    """Where the case stands, by vigil's transitions (vigil/cases/states.py)."""
    state_since: datetime | None = when()
    assignee: str | None = Field(default=None, max_length=ID_LENGTH)
    priority: str | None = Field(default=None, max_length=ID_LENGTH)
    opened_at: datetime = when(nullable=False)
    updated_at: datetime = when(index=True, nullable=False)
    closed_at: datetime | None = when(index=True)
    first_customer_at: datetime | None = when(index=True)
    first_response_at: datetime | None = when()
    last_customer_at: datetime | None = when()
    last_analyst_at: datetime | None = when()
    message_count: int = 0
    resolved_by: str | None = Field(default=None, max_length=32)
    resolution_summary: str | None = Field(default=None, sa_type=sa.Text)
    csat: int | None = None


class MessageRow(SQLModel, table=True):
    """A chat message; ``seq`` numbers them in arrival order (the stream's order)."""

    __tablename__ = "message"
    # A page of a conversation, newest first (vigil/cases/paging.py), walks the index backwards.
    __table_args__ = (
        sa.UniqueConstraint("conversation_id", "message_id", name="uq_message_conversation_message"),
        sa.Index("ix_message_conversation_id_seq", "conversation_id", "seq"),
        # The queue's customer name: the latest customer message that names its author, read from this index's
        # end however many unnamed messages a conversation holds.
        sa.Index(
            "ix_message_named_customer",
            "conversation_id",
            "seq",
            sqlite_where=sa.text("role = 'customer' AND author IS NOT NULL"),
            postgresql_where=sa.text("role = 'customer' AND author IS NOT NULL"),
        ),
    )

    seq: int | None = seq()
    message_id: str = Field(max_length=ID_LENGTH)
    conversation_id: str = Field(index=True, max_length=ID_LENGTH)
    sent_at: datetime = when(nullable=False)
    received_at: datetime = when(nullable=False)
    role: str = Field(max_length=16)
    author: str | None = Field(default=None, max_length=ID_LENGTH)
    text: str = Field(sa_type=sa.Text)
    meta: dict[str, Any] | None = Field(default=None, sa_column=sa.Column("metadata", sa.JSON))
    finished_at: datetime | None = when()
    """When the skills had finished with it (None: a redelivery shows it to them again; vigil/flow/pipeline.py)."""


class CaseEventRow(SQLModel, table=True):
    """A case event as received."""

    __tablename__ = "case_event"
    __table_args__ = (sa.UniqueConstraint("conversation_id", "event_id", name="uq_case_event_conversation_event"),)

    seq: int | None = seq()
    event_id: str = Field(max_length=ID_LENGTH)
    conversation_id: str = Field(index=True, max_length=ID_LENGTH)
    at: datetime = when(nullable=False)
    received_at: datetime = when(nullable=False)
    event: str = Field(max_length=16)
    assignee: str | None = Field(default=None, max_length=ID_LENGTH)
    priority: str | None = Field(default=None, max_length=ID_LENGTH)
    status: str | None = Field(default=None, max_length=ID_LENGTH)
    resolution: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON))
    finished_at: datetime | None = when()
    """When the skills had finished with it (as a message's)."""


class SuggestionRow(SQLModel, table=True):
    """A suggestion vigil made; ``published_at`` is set once it is out on every sink."""

    __tablename__ = "suggestion"
    __table_args__ = (
        sa.Index("ix_suggestion_conversation_id_created_at", "conversation_id", "created_at", "suggestion_id"),
    )

    suggestion_id: str = Field(primary_key=True, max_length=ID_LENGTH)
    conversation_id: str = Field(index=True, max_length=ID_LENGTH)
    tenant: str = Field(max_length=ID_LENGTH)
    in_reply_to: str | None = Field(default=None, index=True, max_length=ID_LENGTH)
    created_at: datetime = when(index=True, nullable=False)
    kind: str = Field(max_length=32)
    text: str = Field(sa_type=sa.Text)
    why: str | None = Field(default=None, sa_type=sa.Text)
    confidence: float
    sources: list[dict[str, Any]] = Field(default_factory=list, sa_column=sa.Column(sa.JSON, nullable=False))
    action: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON))
    step: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON))
    latency_ms: float
    published_at: datetime | None = when()


class FeedbackRow(SQLModel, table=True):
    """An analyst's verdict on a suggestion."""

    __tablename__ = "feedback"
    __table_args__ = (sa.PrimaryKeyConstraint("conversation_id", "feedback_id", name="feedback_pkey"),)

    feedback_id: str = Field(max_length=ID_LENGTH)
    suggestion_id: str = Field(index=True, max_length=ID_LENGTH)
    conversation_id: str = Field(index=True, max_length=ID_LENGTH)
    verdict: str = Field(max_length=16)
    by: str | None = Field(default=None, max_length=ID_LENGTH)
    at: datetime = when(index=True, nullable=False)
    received_at: datetime = when(index=True, nullable=False)
    """Indexed: the miner reads the verdicts received since its mark (vigil/mining/feedback.py)."""
    text: str | None = Field(default=None, sa_type=sa.Text)
    finished_at: datetime | None = when()
    """When the skills had finished with it (as a message's)."""


class ReadMark(SQLModel, table=True):
    """How far an analyst has read a conversation in the panel: suggestions made later are unread to them.

    The analyst's own view of the queue, not part of the case: the panel writes it directly, not through the stream.
    """

    __tablename__ = "read_mark"

    reader: str = Field(primary_key=True, max_length=ID_LENGTH)
    conversation_id: str = Field(primary_key=True, max_length=ID_LENGTH)
    read_at: datetime = when(nullable=False)


class TimerRow(SQLModel, table=True):
    """A durable timer of a case (vigil/cases/timers.py): an SLA target or a commitment's due time, with a warning
    before it. ``fire_at`` is when it next fires: at ``warn_at`` in stage ``warn``, at ``due_at`` in stage ``due``.
    A replica that fires it holds it until ``lease_until``; one that dies mid-fire loses it to the next sweep."""

    __tablename__ = "timer"
    __table_args__ = (
        sa.Index("ix_timer_status_fire_at", "status", "fire_at"),  # the sweep: what has come due
        sa.Index("ix_timer_conversation_id_status", "conversation_id", "status"),  # a case's running timers
    )

    timer_id: str = Field(primary_key=True, max_length=ID_LENGTH)
    conversation_id: str = Field(max_length=ID_LENGTH)
    tenant: str = Field(max_length=ID_LENGTH)
    kind: str = Field(max_length=32)
    """``first_response``, ``next_response``, ``resolution`` (SLA targets) or ``commitment``."""
    ref: str | None = Field(default=None, max_length=ID_LENGTH)
    """What it times: the commitment's id, the event that started an SLA clock."""
    priority: str | None = Field(default=None, max_length=ID_LENGTH)
    started_at: datetime = when(nullable=False)
    warn_at: datetime | None = when()
    due_at: datetime = when(nullable=False)
    stage: str = Field(default="warn", max_length=8)
    fire_at: datetime = when(nullable=False)
    status: str = Field(default="running", max_length=16)
    """``running``, ``done`` (fired at its due time) or ``cancelled`` (met, kept, or no longer applying)."""
    owner: str | None = Field(default=None, max_length=ID_LENGTH)
    lease_until: datetime | None = when()
    warned_at: datetime | None = when()
    fired_at: datetime | None = when()


class CommitmentRow(SQLModel, table=True):
    """Something an analyst promised the customer (vigil/progress/commitments.py finds them)."""

    __tablename__ = "commitment"
    __table_args__ = (sa.PrimaryKeyConstraint("conversation_id", "commitment_id", name="commitment_pkey"),)

    conversation_id: str = Field(max_length=ID_LENGTH)
    commitment_id: str = Field(max_length=ID_LENGTH)
    message_id: str = Field(max_length=ID_LENGTH)
    tenant: str = Field(max_length=ID_LENGTH)
    what: str = Field(sa_type=sa.Text)
    made_at: datetime = when(nullable=False)
    due_at: datetime | None = when()
    status: str = Field(default="open", max_length=16)
    """``open``, ``kept``, ``missed`` or ``cancelled``."""
    settled_at: datetime | None = when()
    settled_by: str | None = Field(default=None, max_length=ID_LENGTH)
    """The message that kept it, or the case event that cancelled it."""


class CaseProgressRow(SQLModel, table=True):
    """What the progress capability last made of a case: its procedure and step, the next step, the customer's
    mood, the problem and what has been tried. The handover brief is read from it."""

    __tablename__ = "case_progress"

    conversation_id: str = Field(primary_key=True, max_length=ID_LENGTH)
    category: str | None = Field(default=None, max_length=ID_LENGTH)
    """The platform's category, from the ``opened`` event."""
    procedure: str | None = Field(default=None, max_length=ID_LENGTH)
    step: str | None = Field(default=None, max_length=ID_LENGTH)
    next_step: str | None = Field(default=None, max_length=ID_LENGTH)
    next_reply: str | None = Field(default=None, sa_type=sa.Text)
    sentiment: float | None = None
    chases: int = 0
    problem: str | None = Field(default=None, sa_type=sa.Text)
    tried: list[str] = Field(default_factory=list, sa_column=sa.Column(sa.JSON, nullable=False))
    handled_by: str | None = Field(default=None, max_length=ID_LENGTH)
    """The assignee the brief was last written for: a new one is a handover."""
    updated_at: datetime = when(nullable=False)


class ActionRow(SQLModel, table=True):
    """An action vigil suggested for a case (vigil/actions/), its verdict and where it stands.

    ``action_id`` is made from the conversation, the action and its arguments (``arguments_hash``) and the event
    that asked for it: a skill retried on that event finds the same action, and the same request asked again once
    the first is over (expired, rejected, failed) is a new action. An approval names the hash; arguments that
    changed since make another action, which needs its own approval.
    """

    __tablename__ = "action"
    __table_args__ = (
        sa.Index("ix_action_conversation_id_suggested_at", "conversation_id", "suggested_at"),
        sa.Index("ix_action_customer_suggested_at", "tenant", "customer_id", "suggested_at"),  # the guard's history
        sa.Index("ix_action_status_expires_at", "status", "expires_at"),  # the expiry sweep
        sa.Index("ix_action_status_claimed_at", "status", "claimed_at"),  # the reconciler
    )

    action_id: str = Field(primary_key=True, max_length=ID_LENGTH)
    conversation_id: str = Field(max_length=ID_LENGTH)
    tenant: str = Field(max_length=ID_LENGTH)
    customer_id: str | None = Field(default=None, max_length=ID_LENGTH)
    name: str = Field(max_length=64)
    arguments: dict[str, Any] = Field(sa_column=sa.Column(sa.JSON, nullable=False))
    arguments_hash: str = Field(max_length=64)
    provenance: dict[str, Any] = Field(default_factory=dict, sa_column=sa.Column(sa.JSON, nullable=False))
    """Where each argument came from: a message (its id and the words), a system's answer, the budget."""
    facts: dict[str, Any] = Field(default_factory=dict, sa_column=sa.Column(sa.JSON, nullable=False))
    """What the policy was told when it decided."""
    amount_cents: int | None = None
    goodwill: bool = False
    verdict: str = Field(max_length=16)
    """``allow``, ``needs_approval`` or ``deny`` (the policy's); ``blocked`` (the conjunctive-risk guard)."""
    rule: str = Field(max_length=ID_LENGTH)
    reason: str = Field(sa_type=sa.Text)
    approver: str | None = Field(default=None, max_length=32)
    """For ``needs_approval``: the role that must approve."""
    separate_from: list[str] | None = Field(default=None, sa_column=sa.Column(sa.JSON))
    """For ``needs_approval``: whose approval does not count, whatever their role (``proposer``, ``reader``: the
    people named in ``facts["_people"]``)."""
    status: str = Field(max_length=16)
    """``suggested``, ``approved``, ``rejected``, ``executing``, ``in_doubt``, ``executed``, ``failed``,
    ``expired``; ``declined`` (the policy denies it) and ``blocked`` (the guard) are never run
    (``vigil.actions.lifecycle``)."""
    suggestion_id: str | None = Field(default=None, max_length=ID_LENGTH)
    suggested_at: datetime = when(nullable=False)
    expires_at: datetime | None = when()
    decided_by: str | None = Field(default=None, max_length=ID_LENGTH)
    decided_at: datetime | None = when()
    executed_at: datetime | None = when()
    attempts: int = 0
    result: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON))
    claimed_at: datetime | None = when()
    """When the action was last approved or claimed for a call: an ``approved`` or ``executing`` action whose claim
    is older than ``VIGIL_ACTIONS__CLAIM_TIMEOUT_S`` is taken over by the reconciler."""


class ActionAuditRow(SQLModel, table=True):
    """One step in an action's life, appended and never changed: the database refuses an UPDATE or DELETE of
    this table (triggers, migration 0014), and no API route writes it."""

    __tablename__ = "action_audit"
    __table_args__ = (sa.Index("ix_action_audit_conversation_id_seq", "conversation_id", "seq"),)

    seq: int | None = seq()
    action_id: str = Field(max_length=ID_LENGTH)
    conversation_id: str = Field(max_length=ID_LENGTH)
    tenant: str = Field(max_length=ID_LENGTH)
    at: datetime = when(nullable=False)
    step: str = Field(max_length=16)
    """``suggested``, ``declined``, ``blocked``, ``redecided``, ``approved``, ``resumed``, ``rejected``,
    ``refused``, ``executing``, ``in_doubt``, ``executed``, ``failed``, ``expired``."""
    actor: str = Field(max_length=ID_LENGTH)
    """Who: a person's name, or ``vigil``."""
    role: str | None = Field(default=None, max_length=32)
    detail: dict[str, Any] = Field(default_factory=dict, sa_column=sa.Column(sa.JSON, nullable=False))


class CustomerLockRow(SQLModel, table=True):
    """One row per (tenant, customer) whose actions were ever guarded: the lock a transaction holds while it reads
    the customer's actions and adds to them (vigil/cases/locks.py). Its only column of interest is the key;
    ``taken_at`` says when it was last taken, for whoever looks at a lock that is held."""

    __tablename__ = "customer_lock"

    tenant: str = Field(primary_key=True, max_length=ID_LENGTH)
    customer_id: str = Field(primary_key=True, max_length=ID_LENGTH)
    taken_at: datetime = when(nullable=False)


CONVERSATION = Conversation.__table__  # type: ignore[attr-defined]
MESSAGE = MessageRow.__table__  # type: ignore[attr-defined]
CASE_EVENT = CaseEventRow.__table__  # type: ignore[attr-defined]
SUGGESTION = SuggestionRow.__table__  # type: ignore[attr-defined]
FEEDBACK = FeedbackRow.__table__  # type: ignore[attr-defined]
TIMER = TimerRow.__table__  # type: ignore[attr-defined]
COMMITMENT = CommitmentRow.__table__  # type: ignore[attr-defined]
CASE_PROGRESS = CaseProgressRow.__table__  # type: ignore[attr-defined]
READ_MARK = ReadMark.__table__  # type: ignore[attr-defined]
ACTION = ActionRow.__table__  # type: ignore[attr-defined]
ACTION_AUDIT = ActionAuditRow.__table__  # type: ignore[attr-defined]
CUSTOMER_LOCK = CustomerLockRow.__table__  # type: ignore[attr-defined]


def first_source(sources: object) -> str | None:
    """The id a stored suggestion's ``sources`` cite first (what an answer was drawn from), if they cite one."""
    if not isinstance(sources, list) or not sources or not isinstance(sources[0], dict):
        return None
    entry_id = sources[0].get("id")
    return entry_id if isinstance(entry_id, str) and entry_id else None
