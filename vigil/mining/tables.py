"""The miner's SQL tables: which cases it has mined (its watermark and its once-only record), and each mined case's
vectors, which a new case is compared with to merge it into what is already known.

The knowledge a case taught lives in the knowledge store (an entry of kind ``case``, or ``faq``, with the cases in
its provenance); these tables are the miner's own bookkeeping.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from vigil.db.schema import ID_LENGTH, when


class MinedCaseRow(SQLModel, table=True):
    """A closed case the miner has dealt with: mined into ``entry_id``, or skipped and why.

    ``closed_at`` is the closure it dealt with: a case reopened and closed again later is mined again.
    """

    __tablename__ = "mined_case"

    conversation_id: str = Field(primary_key=True, max_length=ID_LENGTH)
    tenant: str = Field(max_length=ID_LENGTH)
    closed_at: datetime = when(index=True, nullable=False)
    mined_at: datetime = when(nullable=False)
    outcome: str = Field(max_length=16)
    """``mined``, ``skipped`` (``reason`` says why) or ``withdrawn`` (reopened after it was mined)."""
    reason: str | None = Field(default=None, max_length=64)
    entry_id: str | None = Field(default=None, index=True, max_length=ID_LENGTH)


class CaseVectorRow(SQLModel, table=True):
    """A mined case as a vector (float32, of the knowledge store's embedder: the mean of its problem's and its
    resolution's): what a new case is compared with to merge it into an entry."""

    __tablename__ = "case_vector"

    conversation_id: str = Field(primary_key=True, max_length=ID_LENGTH)
    entry_id: str = Field(index=True, max_length=ID_LENGTH)
    tenant: str = Field(index=True, max_length=ID_LENGTH)
    embedder: str = Field(max_length=ID_LENGTH)
    vector: bytes = Field(sa_column=sa.Column(sa.LargeBinary, nullable=False))
    problem: bytes = Field(sa_column=sa.Column(sa.LargeBinary, nullable=False))
    """Its problem's alone: what tells two entries for the same problem apart (conflicting resolutions)."""


class MinerMarkRow(SQLModel, table=True):
    """How far the miner has read a stream other than the cases: ``feedback``, the analysts' verdicts it has
    counted into its entries' confidence."""

    __tablename__ = "miner_mark"

    name: str = Field(primary_key=True, max_length=ID_LENGTH)
    at: datetime = when(nullable=False)


class CountedVerdictRow(SQLModel, table=True):
    """A verdict the miner has counted into an entry's confidence, kept while it is recent enough to be read again
    (vigil/mining/feedback.py reads a little before its mark, for verdicts stamped by a replica whose clock is
    behind, or committed late): so that none is missed, and none counted twice."""

    __tablename__ = "counted_verdict"
    __table_args__ = (sa.PrimaryKeyConstraint("conversation_id", "feedback_id", name="counted_verdict_pkey"),)

    conversation_id: str = Field(max_length=ID_LENGTH)
    feedback_id: str = Field(max_length=ID_LENGTH)
    received_at: datetime = when(index=True, nullable=False)


MINED_CASE = MinedCaseRow.__table__  # type: ignore[attr-defined]
CASE_VECTOR = CaseVectorRow.__table__  # type: ignore[attr-defined]
MINER_MARK = MinerMarkRow.__table__  # type: ignore[attr-defined]
COUNTED_VERDICT = CountedVerdictRow.__table__  # type: ignore[attr-defined]
