"""tenure: the latest tenure of each partition a consumer was given, its epoch counted up each time, so that writes
made for a record read under an older one are refused (vigil/flow/tenure.py)

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tenure",
        sa.Column("scope", sa.String(length=256), nullable=False),
        sa.Column("epoch", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("holder", sa.String(length=256), nullable=True),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("scope"),
    )


def downgrade() -> None:
    op.drop_table("tenure")
