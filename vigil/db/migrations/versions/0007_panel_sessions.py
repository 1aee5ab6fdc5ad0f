"""the panel: server-side sessions, so that a sign-out or an admin's revocation holds on every replica

Revision ID: 0007
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "panel_session",
        sa.Column("id_sha256", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("via", sa.String(length=16), nullable=False),
        sa.Column("signed_in_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id_sha256"),
    )
    op.create_index(op.f("ix_panel_session_name"), "panel_session", ["name"], unique=False)
    op.create_index(op.f("ix_panel_session_expires_at"), "panel_session", ["expires_at"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_panel_session_expires_at"), table_name="panel_session")
    op.drop_index(op.f("ix_panel_session_name"), table_name="panel_session")
    op.drop_table("panel_session")
