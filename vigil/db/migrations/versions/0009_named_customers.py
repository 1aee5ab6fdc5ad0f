"""named customers: a partial index on the customer messages that name their author, for the queue's names

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAMED_CUSTOMER = sa.text("role = 'customer' AND author IS NOT NULL")


def upgrade() -> None:
    op.create_index(
        "ix_message_named_customer",
        "message",
        ["conversation_id", "seq"],
        sqlite_where=NAMED_CUSTOMER,
        postgresql_where=NAMED_CUSTOMER,
    )


def downgrade() -> None:
    op.drop_index("ix_message_named_customer", table_name="message")
