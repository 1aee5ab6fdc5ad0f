"""actions: the actions suggested for each case, their audit log (which the database keeps append-only), and each
tenant's concession controller

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_APPEND_ONLY = "the action audit log is append-only"


def upgrade() -> None:
    op.create_table(
        "action",
        sa.Column("action_id", sa.String(length=256), nullable=False),
        sa.Column("conversation_id", sa.String(length=256), nullable=False),
        sa.Column("tenant", sa.String(length=256), nullable=False),
        sa.Column("customer_id", sa.String(length=256), nullable=True),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("arguments", sa.JSON(), nullable=False),
        sa.Column("arguments_hash", sa.String(length=64), nullable=False),
        sa.Column("provenance", sa.JSON(), nullable=False),
        sa.Column("facts", sa.JSON(), nullable=False),
        sa.Column("amount_cents", sa.Integer(), nullable=True),
        sa.Column("goodwill", sa.Boolean(), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("rule", sa.String(length=256), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("approver", sa.String(length=32), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("suggestion_id", sa.String(length=256), nullable=True),
        sa.Column("suggested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decided_by", sa.String(length=256), nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("executed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("action_id"),
    )
    op.create_index("ix_action_conversation_id_suggested_at", "action", ["conversation_id", "suggested_at"])
    op.create_index("ix_action_customer_suggested_at", "action", ["tenant", "customer_id", "suggested_at"])
    op.create_index("ix_action_status_expires_at", "action", ["status", "expires_at"])
    op.create_table(
        "action_audit",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("action_id", sa.String(length=256), nullable=False),
        sa.Column("conversation_id", sa.String(length=256), nullable=False),
        sa.Column("tenant", sa.String(length=256), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("step", sa.String(length=16), nullable=False),
        sa.Column("actor", sa.String(length=256), nullable=False),
        sa.Column("role", sa.String(length=32), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("seq"),
    )
    op.create_index("ix_action_audit_conversation_id_seq", "action_audit", ["conversation_id", "seq"])
    _append_only()
    op.create_table(
        "concession",
        sa.Column("tenant", sa.String(length=256), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant"),
    )


def _append_only() -> None:
    """Refuse every UPDATE and DELETE of the audit log in the database itself, so that no code path (and no
    person with the application's credentials) can rewrite what happened."""
    if op.get_bind().dialect.name == "sqlite":
        for verb in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER action_audit_no_{verb.lower()} BEFORE {verb} ON action_audit "
                f"BEGIN SELECT RAISE(ABORT, '{_APPEND_ONLY}'); END"
            )
        return
    op.execute(
        "CREATE OR REPLACE FUNCTION action_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS "
        f"$$ BEGIN RAISE EXCEPTION '{_APPEND_ONLY}'; END $$"
    )
    op.execute(
        "CREATE TRIGGER action_audit_append_only BEFORE UPDATE OR DELETE ON action_audit "
        "FOR EACH ROW EXECUTE FUNCTION action_audit_append_only()"
    )
    op.execute(
        "CREATE TRIGGER action_audit_no_truncate BEFORE TRUNCATE ON action_audit "
        "FOR EACH STATEMENT EXECUTE FUNCTION action_audit_append_only()"
    )


def downgrade() -> None:
    op.drop_table("concession")
    if op.get_bind().dialect.name != "sqlite":
        op.execute("DROP TRIGGER IF EXISTS action_audit_no_truncate ON action_audit")
        op.execute("DROP TRIGGER IF EXISTS action_audit_append_only ON action_audit")
        op.execute("DROP FUNCTION IF EXISTS action_audit_append_only()")
    op.drop_index("ix_action_audit_conversation_id_seq", table_name="action_audit")
    op.drop_table("action_audit")
    op.drop_index("ix_action_status_expires_at", table_name="action")
    op.drop_index("ix_action_customer_suggested_at", table_name="action")
    op.drop_index("ix_action_conversation_id_suggested_at", table_name="action")
    op.drop_table("action")
