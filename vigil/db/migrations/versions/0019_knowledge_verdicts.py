"""knowledge verdicts: the analysts' verdicts on answers, by the question answered and the entry cited, so that a
dismissal lowers that entry for questions like it (vigil/knowledge/verdicts.py)

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "knowledge_verdict",
        sa.Column("conversation_id", sa.String(length=256), nullable=False),
        sa.Column("feedback_id", sa.String(length=256), nullable=False),
        sa.Column("tenant", sa.String(length=256), nullable=False),
        sa.Column("entry_id", sa.String(length=256), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("suggestion_id", sa.String(length=256), nullable=False),
        sa.Column("message_id", sa.String(length=256), nullable=False),
        sa.Column("by", sa.String(length=256), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("embedder", sa.String(length=256), nullable=True),
        sa.Column("vector", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("conversation_id", "feedback_id", name="knowledge_verdict_pkey"),
    )
    op.create_index("ix_knowledge_verdict_tenant", "knowledge_verdict", ["tenant"])
    op.create_index("ix_knowledge_verdict_entry_id", "knowledge_verdict", ["entry_id"])
    op.create_index("ix_knowledge_verdict_received_at", "knowledge_verdict", ["received_at"])


def downgrade() -> None:
    op.drop_table("knowledge_verdict")
