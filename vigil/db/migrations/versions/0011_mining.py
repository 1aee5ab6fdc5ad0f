"""mining: the cases the miner dealt with, the vectors of what it mined, its feedback mark; knowledge expiry

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mined_case",
        sa.Column("conversation_id", sa.String(length=256), nullable=False),
        sa.Column("tenant", sa.String(length=256), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("mined_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=64), nullable=True),
        sa.Column("entry_id", sa.String(length=256), nullable=True),
        sa.PrimaryKeyConstraint("conversation_id"),
    )
    op.create_index("ix_mined_case_closed_at", "mined_case", ["closed_at"])
    op.create_index("ix_mined_case_entry_id", "mined_case", ["entry_id"])
    op.create_table(
        "case_vector",
        sa.Column("conversation_id", sa.String(length=256), nullable=False),
        sa.Column("entry_id", sa.String(length=256), nullable=False),
        sa.Column("tenant", sa.String(length=256), nullable=False),
        sa.Column("embedder", sa.String(length=256), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.Column("problem", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("conversation_id"),
    )
    op.create_index("ix_case_vector_entry_id", "case_vector", ["entry_id"])
    op.create_index("ix_case_vector_tenant", "case_vector", ["tenant"])
    op.create_table(
        "miner_mark",
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.add_column("knowledge_entry", sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
    # Feedback by when it was received: the miner reads what came since its mark.
    op.create_index("ix_feedback_received_at", "feedback", ["received_at"])
    # Closed cases by closure time: the miner's candidates since its watermark.
    op.create_index("ix_conversation_closed_at", "conversation", ["closed_at"])


def downgrade() -> None:
    op.drop_index("ix_conversation_closed_at", table_name="conversation")
    op.drop_index("ix_feedback_received_at", table_name="feedback")
    with op.batch_alter_table("knowledge_entry") as batch:
        batch.drop_column("expires_at")
    op.drop_table("miner_mark")
    op.drop_table("case_vector")
    op.drop_table("mined_case")
