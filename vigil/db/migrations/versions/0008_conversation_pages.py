"""conversation pages: indexes that serve a conversation's messages and suggestions newest first, a page at a time

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_message_conversation_id_seq", "message", ["conversation_id", "seq"])
    op.create_index(
        "ix_suggestion_conversation_id_created_at", "suggestion", ["conversation_id", "created_at", "suggestion_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_suggestion_conversation_id_created_at", table_name="suggestion")
    op.drop_index("ix_message_conversation_id_seq", table_name="message")
