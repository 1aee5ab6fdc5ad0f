"""finished events: when the skills had finished with each message, case event and feedback

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_EVENTS = ("message", "case_event", "feedback")


def upgrade() -> None:
    for table in _EVENTS:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True))
        # Events stored before the mark were handled by skills that ran to their end or are beyond a re-run now:
        # none of them is shown to the skills again.
        op.execute(f"UPDATE {table} SET finished_at = received_at")


def downgrade() -> None:
    for table in _EVENTS:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("finished_at")
