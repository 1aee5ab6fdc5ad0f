"""knowledge store

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "knowledge_entry",
        sa.Column("id", sa.String(length=256), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("origin", sa.String(length=1024), nullable=False),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("url", sa.String(length=1024), nullable=True),
        sa.Column("product", sa.String(length=256), nullable=True),
        sa.Column("questions", sa.JSON(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("provenance", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("knowledge_entry", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_knowledge_entry_kind"), ["kind"], unique=False)
        batch_op.create_index(batch_op.f("ix_knowledge_entry_origin"), ["origin"], unique=False)

    op.create_table(
        "knowledge_passage",
        sa.Column("id", sa.String(length=272), nullable=False),
        sa.Column("entry_id", sa.String(length=256), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("heading", sa.Text(), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("knowledge_passage", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_knowledge_passage_entry_id"), ["entry_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("knowledge_passage", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_knowledge_passage_entry_id"))

    op.drop_table("knowledge_passage")
    with op.batch_alter_table("knowledge_entry", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_knowledge_entry_origin"))
        batch_op.drop_index(batch_op.f("ix_knowledge_entry_kind"))

    op.drop_table("knowledge_entry")
