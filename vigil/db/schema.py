"""What every package's SQL tables (sqlmodel) share: one ``MetaData``, its naming convention, and column types.

Each package declares its own tables (``vigil/cases/tables.py``, ``vigil/knowledge/tables.py``,
``vigil/panel/tables.py``) on this ``metadata``; ``vigil/app/tables.py`` imports them all. Migrations in
``vigil/db/migrations`` build exactly those tables; a test keeps the two in step.

Naming convention: SQLAlchemy's default, under which an index on one column is ``ix_<table>_<column>``; every other
constraint is named where it is declared (``uq_message_conversation_message``, ``feedback_pkey``), as the migrations
name it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

metadata = SQLModel.metadata

ID_LENGTH = 256


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """A timezone-aware timestamp on every database: stored in UTC, read back aware (SQLite keeps no zone)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the case store")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def bind_processor(self, dialect: sa.Dialect) -> Callable[[Any], Any] | None:
        if dialect.name != "sqlite":
            return super().bind_processor(dialect)
        utc = self.process_bind_param

        # SQLite keeps the text of SQLAlchemy's DATETIME ("2026-11-02 09:00:00.000000"), which isoformat writes in
        # one call: a few microseconds less for each timestamp of each row than the two processors in turn. Most
        # timestamps are in UTC already (vigil's clock's): those skip the conversion.
        def process(value: datetime | None) -> str | None:
            if value is not None and value.tzinfo is UTC:
                return value.replace(tzinfo=None).isoformat(" ", "microseconds")
            naive = utc(value, dialect)
            return None if naive is None else naive.isoformat(" ", "microseconds")

        return process

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


# A 64-bit sequence on PostgreSQL; SQLite autoincrements only an INTEGER PRIMARY KEY (its rowid).
Sequence = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def when(*, index: bool = False, nullable: bool = True) -> Any:
    """A timestamp column (``UTCDateTime``)."""
    return Field(default=None, sa_column=sa.Column(UTCDateTime(), index=index, nullable=nullable))


def seq() -> Any:
    """An autoincrementing 64-bit primary key."""
    return Field(default=None, sa_column=sa.Column(Sequence, primary_key=True, autoincrement=True))
