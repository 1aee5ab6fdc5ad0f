"""The platform's own tables: the windows of durable scheduled jobs (``vigil.flow.claims``), named leases
(``vigil.flow.leases``) and the tenures of partitions (``vigil.flow.tenure``)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from vigil.db.schema import ID_LENGTH, UTCDateTime, when


class JobClaimRow(SQLModel, table=True):
    """One window of a durable scheduled job (vigil/flow/claims.py): stored ahead with no owner, so that a restart
    finds it due; claimed by the replica that runs it, for ``lease_until``; closed with its outcome."""

    __tablename__ = "job_claim"

    job: str = Field(primary_key=True, max_length=ID_LENGTH)
    due_at: datetime = Field(sa_column=sa.Column(UTCDateTime(), primary_key=True, nullable=False))
    owner: str | None = Field(default=None, max_length=ID_LENGTH)
    claimed_at: datetime | None = when()
    lease_until: datetime | None = when()
    finished_at: datetime | None = when()
    outcome: str | None = Field(default=None, max_length=16)


JOB_CLAIM = JobClaimRow.__table__  # type: ignore[attr-defined]


class LeaseRow(SQLModel, table=True):
    """A named lease (vigil/flow/leases.py): who holds it, until when. A row with no owner is free."""

    __tablename__ = "lease"

    name: str = Field(primary_key=True, max_length=ID_LENGTH)
    owner: str | None = Field(default=None, max_length=ID_LENGTH)
    held_until: datetime | None = when()


LEASE = LeaseRow.__table__  # type: ignore[attr-defined]


class TenureRow(SQLModel, table=True):
    """The latest tenure of a partition (vigil/flow/tenure.py): its epoch, counted up each time a consumer is given
    the partition, and who that was."""

    __tablename__ = "tenure"

    scope: str = Field(primary_key=True, max_length=ID_LENGTH)
    epoch: int = Field(default=0, sa_column=sa.Column(sa.BigInteger(), nullable=False, server_default="0"))
    holder: str | None = Field(default=None, max_length=ID_LENGTH)
    taken_at: datetime | None = when()


TENURE = TenureRow.__table__  # type: ignore[attr-defined]
