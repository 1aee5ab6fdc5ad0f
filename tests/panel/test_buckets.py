"""Time buckets and percentiles: window edges, clamping, interpolation, and reads cut short."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from vigil.panel.buckets import Buckets, Percentiles, percentile

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def test_a_window_is_cut_into_buckets_from_since_and_the_last_may_be_short():
    buckets = Buckets(T0, T0 + timedelta(minutes=150), 3600)
    assert buckets.count == 3 and buckets.starts == [T0, T0 + timedelta(hours=1), T0 + timedelta(hours=2)]
    assert buckets.index(T0) == 0 and buckets.index(T0 + timedelta(seconds=3599.999999)) == 0
    assert buckets.index(T0 + timedelta(hours=1)) == 1
    assert buckets.clamp(-1) == 0 and buckets.clamp(7) == 2  # what a database rounds past an edge stays inside


def test_percentiles_interpolate_between_ranks():
    assert percentile([], 0.5) is None
    assert percentile([7.0], 0.9) == 7.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert percentile([10.0, 20.0, 30.0, 40.0, 50.0], 0.9) == pytest.approx(46.0)
    assert percentile([10.0, 20.0], 0.0) == 10.0 and percentile([10.0, 20.0], 1.0) == 20.0


def test_a_read_cut_short_leaves_only_whole_buckets():
    buckets = Buckets(T0, T0 + timedelta(hours=3), 3600)
    rows = [
        (T0 + timedelta(hours=h, minutes=m), float(v)) for h, m, v in [(2, 30, 5), (2, 10, 7), (1, 50, 3), (1, 5, 1)]
    ]
    whole = Percentiles(buckets, rows, 10, (0.5,))
    assert not whole.truncated and whole.series == [[None, 2.0, 6.0]] and whole.totals == [4.0]
    cut = Percentiles(buckets, rows, 3, (0.5,))  # the row at 10:05 was not read: hour 1 may be missing more
    assert cut.truncated and cut.series == [[None, None, 6.0]] and cut.totals == [None]
    older = Percentiles(buckets, [*rows[:3], (T0, 9.0)], 3, (0.5,))  # the unread row is in an older bucket
    assert older.truncated and older.series == [[None, 3.0, 6.0]]
