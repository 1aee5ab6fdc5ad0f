"""customer_lock: one row per (tenant, customer), the lock under which a customer's actions are guarded (read and
added to, or claimed for execution) one transaction at a time

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "customer_lock",
        sa.Column("tenant", sa.String(length=256), nullable=False),
        sa.Column("customer_id", sa.String(length=256), nullable=False),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "customer_id"),
    )


def downgrade() -> None:
    op.drop_table("customer_lock")
