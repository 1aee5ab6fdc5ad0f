"""The knowledge store's SQL tables: entries and their passages (their vectors live in Chroma), and the analysts'
verdicts on the answers drawn from them (``verdicts.py``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from vigil.db.schema import ID_LENGTH, when


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
    expires_at: datetime | None = when()
    """After it, the entry is no longer served (None: never)."""
    created_at: datetime = when(nullable=False)
    updated_at: datetime = when(nullable=False)


class KnowledgePassageRow(SQLModel, table=True):
    """A retrievable passage of a knowledge entry (an article's section, an FAQ's question and answer)."""

    __tablename__ = "knowledge_passage"

    id: str = Field(primary_key=True, max_length=ID_LENGTH + 16)
    entry_id: str = Field(index=True, max_length=ID_LENGTH)
    position: int
    heading: str | None = Field(default=None, sa_type=sa.Text)
    text: str = Field(sa_type=sa.Text)


class KnowledgeVerdictRow(SQLModel, table=True):
    """An analyst's verdict on an answer: the question it answered, the entry it cited first, accepted, edited or
    dismissed. Kept with the feedback event that carries it (``vigil.answers.verdicts``), keyed as that event is."""

    __tablename__ = "knowledge_verdict"
    __table_args__ = (sa.PrimaryKeyConstraint("conversation_id", "feedback_id", name="knowledge_verdict_pkey"),)

    conversation_id: str = Field(max_length=ID_LENGTH)
    feedback_id: str = Field(max_length=ID_LENGTH)
    tenant: str = Field(index=True, max_length=ID_LENGTH)
    entry_id: str = Field(index=True, max_length=ID_LENGTH)
    verdict: str = Field(max_length=16)
    question: str = Field(sa_type=sa.Text)
    """The customer's message the answer replied to."""
    text: str | None = Field(default=None, sa_type=sa.Text)
    """An edit's reply as sent, or a dismissal's reason."""
    suggestion_id: str = Field(max_length=ID_LENGTH)
    message_id: str = Field(max_length=ID_LENGTH)
    by: str | None = Field(default=None, max_length=ID_LENGTH)
    at: datetime = when(nullable=False)
    received_at: datetime = when(index=True, nullable=False)
    """Indexed: a refresh reads the verdicts received since the last (``verdicts.py``); ages are counted from it."""
    embedder: str | None = Field(default=None, max_length=ID_LENGTH)
    vector: bytes | None = Field(default=None, sa_column=sa.Column(sa.LargeBinary))
    """The question's vector (float32, of ``embedder``), written by the first refresh that embeds it; None until."""


SUPERSEDED_BY = "superseded_by"
"""In a mined entry's provenance: the FAQ that took it over (it is retired while that lasts, and served again when
the FAQ's group falls apart). A lead's approval or retirement removes it, so a retirement stands when the group falls
apart; an approved entry is served until the miner's next run finds it in an FAQ's group again."""

FAQ_SINCE = "faq_since"
"""In a mined entry's provenance: when the miner first wrote it as an FAQ (ISO 8601), while it is one."""

ENTRY = KnowledgeEntryRow.__table__  # type: ignore[attr-defined]
PASSAGE = KnowledgePassageRow.__table__  # type: ignore[attr-defined]
VERDICT = KnowledgeVerdictRow.__table__  # type: ignore[attr-defined]
