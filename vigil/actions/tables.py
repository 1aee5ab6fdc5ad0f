"""The actions capability's own table: each tenant's concession controller (vigil/actions/concessions.py). The
actions themselves and their audit log are the cases' (vigil/cases/tables.py), which the panel reads."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from vigil.db.schema import ID_LENGTH, when


class ConcessionRow(SQLModel, table=True):
    """A tenant's PID-Lagrangian controller state (``ControllerState.to_dict``), shared by every replica."""

    __tablename__ = "concession"

    tenant: str = Field(primary_key=True, max_length=ID_LENGTH)
    state: dict[str, Any] = Field(sa_column=sa.Column(sa.JSON, nullable=False))
    updated_at: datetime = when(nullable=False)


CONCESSION = ConcessionRow.__table__  # type: ignore[attr-defined]
