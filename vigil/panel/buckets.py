"""A time window cut into buckets of equal length: which bucket a timestamp falls in, in SQL and in Python.

Bucket ``i`` starts at ``since + i * bucket_s`` (UTC). ``since`` and ``until`` are floored to the second, so a
bucket's edges are whole seconds and the database need only count whole seconds: on PostgreSQL from
``EXTRACT(epoch ...)``; on SQLite, which keeps UTC text, from the text cut to the second (``STRFTIME('%s')`` of the
full text rounds the fraction to milliseconds, and would tip a row at 09:59:59.9999 into the next bucket).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import sqlalchemy as sa

MAX_BUCKETS = 1000


class Buckets:
    """``[since, until)`` cut into buckets of ``bucket_s`` seconds from ``since``; the last may be cut short.

    Raises:
        ValueError: naive times, an empty window, or more than ``MAX_BUCKETS`` buckets.
    """

    def __init__(self, since: datetime, until: datetime, bucket_s: int) -> None:
        if since.tzinfo is None or until.tzinfo is None:
            raise ValueError("since and until must be timezone-aware")
        if bucket_s < 1:
            raise ValueError("bucket_s must be at least 1")
        self.since = since.astimezone(UTC).replace(microsecond=0)
        self.until = until.astimezone(UTC).replace(microsecond=0)
        if self.until <= self.since:
            raise ValueError("until must be after since")
        self.bucket_s = bucket_s
        self.step = timedelta(seconds=bucket_s)
        self.count = -((self.since - self.until) // self.step)
        if self.count > MAX_BUCKETS:
            raise ValueError(f"{self.count} buckets; at most {MAX_BUCKETS}")
        self.starts = [self.since + i * self.step for i in range(self.count)]
        self._epoch = int(self.since.timestamp())

    def index(self, at: datetime) -> int:
        """The bucket of a timestamp inside the window."""
        return self.clamp((at - self.since) // self.step)

    def clamp(self, bucket: int) -> int:
        """A bucket index the database worked out, kept inside the window."""
        return min(max(int(bucket), 0), self.count - 1)

    def holds(self, column: Any) -> Any:
        """The SQL condition that a timestamp column falls in the window."""
        return sa.and_(column >= self.since, column < self.until)

    def sql(self, column: Any, dialect: str) -> Any:
        """The SQL for the bucket index of a timestamp column (only for rows inside the window)."""
        if dialect == "sqlite":
            # Stored as 'YYYY-MM-DD HH:MM:SS.ffffff' (UTC): cut to the second before STRFTIME rounds it.
            seconds = sa.cast(sa.func.strftime("%s", sa.func.substr(column, 1, 19)), sa.Integer)
            return (seconds - sa.literal(self._epoch, sa.Integer)) // self.bucket_s
        offset = sa.extract("epoch", column) - sa.literal(self._epoch, sa.BigInteger)
        return sa.cast(sa.func.floor(offset / self.bucket_s), sa.BigInteger)


class Percentiles:
    """Quantiles of a series per bucket and over the window, from its newest rows.

    ``rows`` are ``(timestamp, value)`` newest first, at most ``max_rows + 1`` of them: one more than ``max_rows``
    says the read was cut (``truncated``). Then only the buckets newer than the first row left out were read whole;
    the others, and the totals, are None. ``series[k]`` holds quantile ``quantiles[k]`` per bucket, ``totals[k]``
    over the window.
    """

    def __init__(
        self, buckets: Buckets, rows: Sequence[tuple[datetime, float]], max_rows: int, quantiles: Sequence[float]
    ) -> None:
        self.truncated = len(rows) > max_rows
        whole_from = buckets.index(rows[max_rows][0]) + 1 if self.truncated else 0
        values: list[list[float]] = [[] for _ in range(buckets.count)]
        for at, value in rows[:max_rows]:
            values[buckets.index(at)].append(float(value))
        self.series = [[percentile(v, q) if i >= whole_from else None for i, v in enumerate(values)] for q in quantiles]
        everything = [v for bucket in values for v in bucket]
        self.totals = [None if self.truncated else percentile(everything, q) for q in quantiles]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) with linear interpolation between the closest ranks; None for no values."""
    return float(np.quantile(values, q)) if len(values) else None
