"""leases: one holder at a time of work that must not run twice at once (the miner); the verdicts the miner counted

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "lease",
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("owner", sa.String(length=256), nullable=True),
        sa.Column("held_until", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "counted_verdict",
        sa.Column("conversation_id", sa.String(length=256), nullable=False),
        sa.Column("feedback_id", sa.String(length=256), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", "feedback_id", name="counted_verdict_pkey"),
    )
    op.create_index("ix_counted_verdict_received_at", "counted_verdict", ["received_at"])


def downgrade() -> None:
    op.drop_index("ix_counted_verdict_received_at", table_name="counted_verdict")
    op.drop_table("counted_verdict")
    op.drop_table("lease")
