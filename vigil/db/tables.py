"""The case store's SQL tables (sqlmodel), the one place they are declared.

A conversation's tenant lives on its ``conversation`` row only; messages, case events and feedback hang off it.
A conversation id names one conversation of one tenant (another tenant's event for it is refused), so the
conversation id and the event's own id together are the event's idempotency key: two conversations, of one tenant
or of two, may reuse a message, event or feedback id.

Migrations in ``vigil/db/migrations`` build exactly these; a test keeps the two in step.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

metadata = SQLModel.metadata

ID_LENGTH = 256


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """A timezone-aware timestamp on every database: stored in UTC, read back aware (SQLite keeps no zone)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the case store")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


# A 64-bit sequence on PostgreSQL; SQLite autoincrements only an INTEGER PRIMARY KEY (its rowid).
Sequence = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _when(*, index: bool = False, nullable: bool = True) -> Any:
    return Field(default=None, sa_column=sa.Column(UTCDateTime(), index=index, nullable=nullable))


def _seq() -> Any:
    return Field(default=None, sa_column=sa.Column(Sequence, primary_key=True, autoincrement=True))


class Conversation(SQLModel, table=True):
    """One support case: the conversation and its state."""

    id: str = Field(primary_key=True, max_length=ID_LENGTH)
    tenant: str = Field(index=True, max_length=ID_LENGTH)
    status: str = Field(default="open", max_length=ID_LENGTH)
    assignee: str | None = Field(default=None, max_length=ID_LENGTH)
    priority: str | None = Field(default=None, max_length=ID_LENGTH)
    opened_at: datetime = _when(nullable=False)
    updated_at: datetime = _when(index=True, nullable=False)
    closed_at: datetime | None = _when()
    first_customer_at: datetime | None = _when(index=True)
    first_response_at: datetime | None = _when()
    last_customer_at: datetime | None = _when()
    last_analyst_at: datetime | None = _when()
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

    seq: int | None = _seq()
    message_id: str = Field(max_length=ID_LENGTH)
    conversation_id: str = Field(index=True, max_length=ID_LENGTH)
    sent_at: datetime = _when(nullable=False)
    received_at: datetime = _when(nullable=False)
    role: str = Field(max_length=16)
    author: str | None = Field(default=None, max_length=ID_LENGTH)
    text: str = Field(sa_type=sa.Text)
    meta: dict[str, Any] | None = Field(default=None, sa_column=sa.Column("metadata", sa.JSON))


class CaseEventRow(SQLModel, table=True):
    """A case event as received."""

    __tablename__ = "case_event"
    __table_args__ = (sa.UniqueConstraint("conversation_id", "event_id", name="uq_case_event_conversation_event"),)

    seq: int | None = _seq()
    event_id: str = Field(max_length=ID_LENGTH)
    conversation_id: str = Field(index=True, max_length=ID_LENGTH)
    at: datetime = _when(nullable=False)
    received_at: datetime = _when(nullable=False)
    event: str = Field(max_length=16)
    assignee: str | None = Field(default=None, max_length=ID_LENGTH)
    priority: str | None = Field(default=None, max_length=ID_LENGTH)
    status: str | None = Field(default=None, max_length=ID_LENGTH)
    resolution: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON))


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
    created_at: datetime = _when(index=True, nullable=False)
    kind: str = Field(max_length=32)
    text: str = Field(sa_type=sa.Text)
    why: str | None = Field(default=None, sa_type=sa.Text)
    confidence: float
    sources: list[dict[str, Any]] = Field(default_factory=list, sa_column=sa.Column(sa.JSON, nullable=False))
    action: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON))
    latency_ms: float
    published_at: datetime | None = _when()


class FeedbackRow(SQLModel, table=True):
    """An analyst's verdict on a suggestion."""

    __tablename__ = "feedback"
    __table_args__ = (sa.PrimaryKeyConstraint("conversation_id", "feedback_id", name="feedback_pkey"),)

    feedback_id: str = Field(max_length=ID_LENGTH)
    suggestion_id: str = Field(index=True, max_length=ID_LENGTH)
    conversation_id: str = Field(index=True, max_length=ID_LENGTH)
    verdict: str = Field(max_length=16)
    by: str | None = Field(default=None, max_length=ID_LENGTH)
    at: datetime = _when(index=True, nullable=False)
    received_at: datetime = _when(nullable=False)
    text: str | None = Field(default=None, sa_type=sa.Text)


class ReadMark(SQLModel, table=True):
    """How far an analyst has read a conversation in the panel: suggestions made later are unread to them.

    The analyst's own view of the queue, not part of the case: the panel writes it directly, not through the stream.
    """

    __tablename__ = "read_mark"

    reader: str = Field(primary_key=True, max_length=ID_LENGTH)
    conversation_id: str = Field(primary_key=True, max_length=ID_LENGTH)
    read_at: datetime = _when(nullable=False)


class PanelSession(SQLModel, table=True):
    """A panel sign-in in a browser: its cookie names it, and it ends when its row goes (sign-out, an admin, expiry).

    Kept in the database, not in the cookie alone, so that every replica sees a sign-out at once. The cookie holds
    the session's id; the row only its SHA-256, as for tokens.
    """

    __tablename__ = "panel_session"

    id_sha256: str = Field(primary_key=True, max_length=64)
    name: str = Field(index=True, max_length=ID_LENGTH)
    via: str = Field(max_length=16)
    signed_in_at: datetime = _when(nullable=False)
    expires_at: datetime = _when(index=True, nullable=False)


class KnowledgeEntryRow(SQLModel, table=True):
    """A knowledge entry (article, FAQ, document, mined case knowledge): the source a suggestion cites."""

    __tablename__ = "knowledge_entry"

    id: str = Field(primary_key=True, max_length=ID_LENGTH)
    kind: str = Field(index=True, max_length=16)
    title: str = Field(sa_type=sa.Text)
    body: str = Field(sa_type=sa.Text)
    origin: str = Field(index=True, max_length=1024)
    tags: list[str] = Field(default_factory=list, sa_column=sa.Column(sa.JSON, nullable=False))
    url: str | None = Field(default=None, max_length=1024)
    product: str | None = Field(default=None, max_length=ID_LENGTH)
    questions: list[str] = Field(default_factory=list, sa_column=sa.Column(sa.JSON, nullable=False))
    question_vectors: list[str] | None = Field(default=None, sa_column=sa.Column(sa.JSON))
    """The ids of the question vectors stored in Chroma for it (None: stored before they were tracked)."""
    tenant: str | None = Field(default=None, index=True, max_length=ID_LENGTH)
    """The one tenant that may see it; None for every tenant."""
    digest: str = Field(max_length=64)
    status: str = Field(default="active", max_length=16)
    confidence: float = 1.0
    provenance: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON))
    created_at: datetime = _when(nullable=False)
    updated_at: datetime = _when(nullable=False)


class KnowledgePassageRow(SQLModel, table=True):
    """A retrievable passage of a knowledge entry (an article's section, an FAQ's question and answer)."""

    __tablename__ = "knowledge_passage"

    id: str = Field(primary_key=True, max_length=ID_LENGTH + 16)
    entry_id: str = Field(index=True, max_length=ID_LENGTH)
    position: int
    heading: str | None = Field(default=None, sa_type=sa.Text)
    text: str = Field(sa_type=sa.Text)


class JobClaimRow(SQLModel, table=True):
    """One window of a durable scheduled job (vigil/flow/claims.py): stored ahead with no owner, so that a restart
    finds it due; claimed by the replica that runs it, for ``lease_until``; closed with its outcome."""

    __tablename__ = "job_claim"

    job: str = Field(primary_key=True, max_length=ID_LENGTH)
    due_at: datetime = Field(sa_column=sa.Column(UTCDateTime(), primary_key=True, nullable=False))
    owner: str | None = Field(default=None, max_length=ID_LENGTH)
    claimed_at: datetime | None = _when()
    lease_until: datetime | None = _when()
    finished_at: datetime | None = _when()
    outcome: str | None = Field(default=None, max_length=16)
