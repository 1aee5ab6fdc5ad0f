"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "case_event",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("event_id", sa.String(length=256), nullable=False),
        sa.Column("conversation_id", sa.String(length=256), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("event", sa.String(length=16), nullable=False),
        sa.Column("assignee", sa.String(length=256), nullable=True),
        sa.Column("priority", sa.String(length=256), nullable=True),
        sa.Column("status", sa.String(length=256), nullable=True),
        sa.Column("resolution", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("event_id"),
    )
    with op.batch_alter_table("case_event", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_case_event_conversation_id"), ["conversation_id"], unique=False)

    op.create_table(
        "conversation",
        sa.Column("id", sa.String(length=256), nullable=False),
        sa.Column("tenant", sa.String(length=256), nullable=False),
        sa.Column("status", sa.String(length=256), nullable=False),
        sa.Column("assignee", sa.String(length=256), nullable=True),
        sa.Column("priority", sa.String(length=256), nullable=True),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("first_customer_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("first_response_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_customer_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_analyst_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("resolved_by", sa.String(length=32), nullable=True),
        sa.Column("resolution_summary", sa.Text(), nullable=True),
        sa.Column("csat", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("conversation", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_conversation_tenant"), ["tenant"], unique=False)
        batch_op.create_index(batch_op.f("ix_conversation_updated_at"), ["updated_at"], unique=False)

    op.create_table(
        "feedback",
        sa.Column("feedback_id", sa.String(length=256), nullable=False),
        sa.Column("suggestion_id", sa.String(length=256), nullable=False),
        sa.Column("conversation_id", sa.String(length=256), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("by", sa.String(length=256), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("feedback_id"),
    )
    with op.batch_alter_table("feedback", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_feedback_conversation_id"), ["conversation_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_feedback_suggestion_id"), ["suggestion_id"], unique=False)

    op.create_table(
        "message",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("message_id", sa.String(length=256), nullable=False),
        sa.Column("conversation_id", sa.String(length=256), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("author", sa.String(length=256), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("message_id"),
    )
    with op.batch_alter_table("message", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_message_conversation_id"), ["conversation_id"], unique=False)

    op.create_table(
        "suggestion",
        sa.Column("suggestion_id", sa.String(length=256), nullable=False),
        sa.Column("conversation_id", sa.String(length=256), nullable=False),
        sa.Column("tenant", sa.String(length=256), nullable=False),
        sa.Column("in_reply_to", sa.String(length=256), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("sources", sa.JSON(), nullable=False),
        sa.Column("action", sa.JSON(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("suggestion_id"),
    )
    with op.batch_alter_table("suggestion", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_suggestion_conversation_id"), ["conversation_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_suggestion_in_reply_to"), ["in_reply_to"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("suggestion", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_suggestion_in_reply_to"))
        batch_op.drop_index(batch_op.f("ix_suggestion_conversation_id"))

    op.drop_table("suggestion")
    with op.batch_alter_table("message", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_message_conversation_id"))

    op.drop_table("message")
    with op.batch_alter_table("feedback", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_feedback_suggestion_id"))
        batch_op.drop_index(batch_op.f("ix_feedback_conversation_id"))

    op.drop_table("feedback")
    with op.batch_alter_table("conversation", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_conversation_updated_at"))
        batch_op.drop_index(batch_op.f("ix_conversation_tenant"))

    op.drop_table("conversation")
    with op.batch_alter_table("case_event", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_case_event_conversation_id"))

    op.drop_table("case_event")
