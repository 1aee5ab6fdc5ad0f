"""Column types: timestamps are stored in UTC and read back aware, the same text on SQLite whichever path wrote it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import sqlite

from vigil.db.schema import UTCDateTime

MOMENTS = [
    datetime(2026, 11, 2, 9, 0, tzinfo=UTC),
    datetime(2026, 11, 2, 9, 0, 0, 7, tzinfo=UTC),
    datetime(2026, 11, 2, 23, 30, 59, 999999, tzinfo=timezone(timedelta(hours=-5))),  # the next day in UTC
    datetime(5, 1, 2, 3, 4, 5, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
]


@pytest.mark.parametrize("moment", MOMENTS, ids=str)
def test_sqlite_stores_sqlalchemys_datetime_text_of_the_utc_moment_and_reads_it_back_aware(moment: datetime):
    dialect = sqlite.dialect()
    stored = UTCDateTime().dialect_impl(dialect).bind_processor(dialect)(moment)
    plain = sqlite.DATETIME().bind_processor(dialect)(moment.astimezone(UTC).replace(tzinfo=None))
    assert stored == plain
    read = UTCDateTime().dialect_impl(dialect).result_processor(dialect, None)(stored)
    assert read == moment and read.tzinfo is UTC


def test_a_naive_timestamp_is_refused_and_none_stays_none():
    dialect = sqlite.dialect()
    process = UTCDateTime().dialect_impl(dialect).bind_processor(dialect)
    assert process is not None and process(None) is None
    with pytest.raises(ValueError, match="naive"):
        process(datetime(2026, 11, 2, 9, 0))


def test_sqlite_orders_the_stored_text_as_the_moments(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 't.db'}")
    table = sa.Table("t", sa.MetaData(), sa.Column("at", UTCDateTime()))
    table.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(table.insert(), [{"at": m} for m in reversed(MOMENTS)])
        read = [row.at for row in conn.execute(sa.select(table.c.at).order_by(table.c.at))]
    assert read == sorted(MOMENTS)
