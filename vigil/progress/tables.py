"""The progress capability's own table: the procedures mined per tenant (vigil/progress/library.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from vigil.db.schema import ID_LENGTH, when


class ProcedureRow(SQLModel, table=True):
    """One procedure of a tenant: its graph of steps as ``Procedure.to_dict`` writes it."""

    __tablename__ = "procedure"

    tenant: str = Field(primary_key=True, max_length=ID_LENGTH)
    name: str = Field(primary_key=True, max_length=ID_LENGTH)
    cases: int
    body: dict[str, Any] = Field(sa_column=sa.Column(sa.JSON, nullable=False))
    mined_at: datetime = when(nullable=False)


PROCEDURE = ProcedureRow.__table__  # type: ignore[attr-defined]
