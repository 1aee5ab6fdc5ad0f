"""knowledge: an optional tenant per entry (existing entries stay global), and the question vectors stored for it

Revision ID: 0006
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Both nullable, so every existing row keeps its meaning: no tenant is every tenant, and no list of question
    # vectors means the ones numbered after its questions (what the code stored before; repair removes the rest).
    with op.batch_alter_table("knowledge_entry", schema=None) as batch_op:
        batch_op.add_column(sa.Column("question_vectors", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("tenant", sa.String(length=256), nullable=True))
        batch_op.create_index(batch_op.f("ix_knowledge_entry_tenant"), ["tenant"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("knowledge_entry", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_knowledge_entry_tenant"))
        batch_op.drop_column("tenant")
        batch_op.drop_column("question_vectors")
