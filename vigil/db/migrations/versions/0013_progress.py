"""progress: where each case stands and since when, its timers and commitments, what progress made of it

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    _progress_tables()
    with op.batch_alter_table("suggestion") as batch:
        batch.add_column(sa.Column("step", sa.JSON(), nullable=True))
    with op.batch_alter_table("conversation") as batch:
        batch.add_column(sa.Column("state", sa.String(length=32), nullable=False, server_default="new"))
        batch.add_column(sa.Column("state_since", sa.DateTime(timezone=True), nullable=True))
    # The cases stored before states: their state from what the conversation row says of them.
    op.execute(
        """
        UPDATE conversation SET state_since = updated_at, state = CASE
            WHEN status = 'closed' THEN 'closed'
            WHEN status IN ('solved', 'resolved') THEN 'resolved'
            WHEN status IN ('escalated', 'on_hold', 'hold') THEN 'waiting_on_internal'
            WHEN status = 'pending' THEN 'waiting_on_customer'
            WHEN last_analyst_at IS NULL THEN 'new'
            WHEN last_customer_at IS NOT NULL AND last_customer_at > last_analyst_at THEN 'waiting_on_analyst'
            ELSE 'waiting_on_customer'
        END
        """
    )


def _progress_tables() -> None:
    op.create_table(
        "timer",
        sa.Column("timer_id", sa.String(length=256), nullable=False),
        sa.Column("conversation_id", sa.String(length=256), nullable=False),
        sa.Column("tenant", sa.String(length=256), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("ref", sa.String(length=256), nullable=True),
        sa.Column("priority", sa.String(length=256), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("warn_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stage", sa.String(length=8), nullable=False),
        sa.Column("fire_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("owner", sa.String(length=256), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("warned_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("fired_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("timer_id"),
    )
    op.create_index("ix_timer_conversation_id_status", "timer", ["conversation_id", "status"])
    op.create_index("ix_timer_status_fire_at", "timer", ["status", "fire_at"])
    op.create_table(
        "commitment",
        sa.Column("conversation_id", sa.String(length=256), nullable=False),
        sa.Column("commitment_id", sa.String(length=256), nullable=False),
        sa.Column("message_id", sa.String(length=256), nullable=False),
        sa.Column("tenant", sa.String(length=256), nullable=False),
        sa.Column("what", sa.Text(), nullable=False),
        sa.Column("made_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("settled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("settled_by", sa.String(length=256), nullable=True),
        sa.PrimaryKeyConstraint("conversation_id", "commitment_id", name="commitment_pkey"),
    )
    op.create_table(
        "case_progress",
        sa.Column("conversation_id", sa.String(length=256), nullable=False),
        sa.Column("category", sa.String(length=256), nullable=True),
        sa.Column("procedure", sa.String(length=256), nullable=True),
        sa.Column("step", sa.String(length=256), nullable=True),
        sa.Column("next_step", sa.String(length=256), nullable=True),
        sa.Column("next_reply", sa.Text(), nullable=True),
        sa.Column("sentiment", sa.Float(), nullable=True),
        sa.Column("chases", sa.Integer(), nullable=False),
        sa.Column("problem", sa.Text(), nullable=True),
        sa.Column("tried", sa.JSON(), nullable=False),
        sa.Column("handled_by", sa.String(length=256), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("conversation_id"),
    )
    op.create_table(
        "procedure",
        sa.Column("tenant", sa.String(length=256), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("cases", sa.Integer(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("mined_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "name"),
    )


def downgrade() -> None:
    op.drop_table("procedure")
    op.drop_table("case_progress")
    op.drop_table("commitment")
    op.drop_index("ix_timer_status_fire_at", table_name="timer")
    op.drop_index("ix_timer_conversation_id_status", table_name="timer")
    op.drop_table("timer")
    with op.batch_alter_table("suggestion") as batch:
        batch.drop_column("step")
    with op.batch_alter_table("conversation") as batch:
        batch.drop_column("state_since")
        batch.drop_column("state")
