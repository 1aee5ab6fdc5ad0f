"""the panel: how far each analyst has read each conversation (unread suggestions in the queue)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "read_mark",
        sa.Column("reader", sa.String(length=256), nullable=False),
        sa.Column("conversation_id", sa.String(length=256), nullable=False),
        sa.Column("read_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("reader", "conversation_id"),
    )


def downgrade() -> None:
    op.drop_table("read_mark")
