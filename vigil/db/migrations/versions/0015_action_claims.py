"""action claims: when an action was last approved or claimed for a call, so that the reconciler takes over the
ones whose claim has lapsed (a crash, a replica gone) and settles those in doubt

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("action", sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index("ix_action_status_claimed_at", "action", ["status", "claimed_at"])


def downgrade() -> None:
    op.drop_index("ix_action_status_claimed_at", table_name="action")
    with op.batch_alter_table("action") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("claimed_at")
