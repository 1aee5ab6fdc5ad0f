"""action separation: who may not approve an action whatever their role (the policy's ``@separate_from``: the
analyst who proposed it, the one who read it back)

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("action", sa.Column("separate_from", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("action") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("separate_from")
