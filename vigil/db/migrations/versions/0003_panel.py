"""the panel: why a suggestion was made; time indexes for the lead overview

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("suggestion") as batch:
        batch.add_column(sa.Column("why", sa.Text(), nullable=True))
    op.create_index(op.f("ix_suggestion_created_at"), "suggestion", ["created_at"], unique=False)
    op.create_index(op.f("ix_feedback_at"), "feedback", ["at"], unique=False)
    op.create_index(op.f("ix_conversation_first_customer_at"), "conversation", ["first_customer_at"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_conversation_first_customer_at"), table_name="conversation")
    op.drop_index(op.f("ix_feedback_at"), table_name="feedback")
    op.drop_index(op.f("ix_suggestion_created_at"), table_name="suggestion")
    with op.batch_alter_table("suggestion") as batch:
        batch.drop_column("why")
