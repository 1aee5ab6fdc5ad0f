"""idempotency by conversation and id: messages, case events and feedback of two conversations may share an id

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# 0001 left its unique constraints unnamed; PostgreSQL named them thus, and on SQLite (where batch mode rebuilds
# the table) this convention names them so that they can be dropped.
_NAMES = {"uq": "%(table_name)s_%(column_0_name)s_key", "pk": "%(table_name)s_pkey"}


def upgrade() -> None:
    # Every stored row keeps its place: the old keys were unique on their own, so the wider ones are too.
    with op.batch_alter_table("message", naming_convention=_NAMES) as batch_op:
        batch_op.drop_constraint("message_message_id_key", type_="unique")
        batch_op.create_unique_constraint("uq_message_conversation_message", ["conversation_id", "message_id"])
    with op.batch_alter_table("case_event", naming_convention=_NAMES) as batch_op:
        batch_op.drop_constraint("case_event_event_id_key", type_="unique")
        batch_op.create_unique_constraint("uq_case_event_conversation_event", ["conversation_id", "event_id"])
    with op.batch_alter_table("feedback", naming_convention=_NAMES) as batch_op:
        batch_op.drop_constraint("feedback_pkey", type_="primary")
        batch_op.create_primary_key("feedback_pkey", ["conversation_id", "feedback_id"])


def downgrade() -> None:
    # Fails, as it must, if two conversations have come to share an id since.
    with op.batch_alter_table("feedback", naming_convention=_NAMES) as batch_op:
        batch_op.drop_constraint("feedback_pkey", type_="primary")
        batch_op.create_primary_key("feedback_pkey", ["feedback_id"])
    with op.batch_alter_table("case_event", naming_convention=_NAMES) as batch_op:
        batch_op.drop_constraint("uq_case_event_conversation_event", type_="unique")
        batch_op.create_unique_constraint("case_event_event_id_key", ["event_id"])
    with op.batch_alter_table("message", naming_convention=_NAMES) as batch_op:
        batch_op.drop_constraint("uq_message_conversation_message", type_="unique")
        batch_op.create_unique_constraint("message_message_id_key", ["message_id"])
