"""Reading vigil's ``/metrics``: event counters and the processing-time histogram, and quantiles from it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

CONSUMED = "vigil_events_consumed"
DEAD_LETTERED = "vigil_events_dead_lettered"
PROCESSING = "vigil_event_processing_seconds"
LOOP_LAG = "vigil_event_loop_lag_seconds"
LOOP_LAG_MAX = "vigil_event_loop_lag_max_seconds"


@dataclass(frozen=True, slots=True)
class Histogram:
    """Cumulative bucket counts by upper bound (the last bound is ``inf``)."""

    bounds: tuple[float, ...]
    counts: tuple[float, ...]

    @property
    def total(self) -> float:
        return self.counts[-1] if self.counts else 0.0

    def __sub__(self, earlier: Histogram) -> Histogram:
        """The observations made after ``earlier`` was read."""
        if earlier.bounds != self.bounds:
            raise ValueError("histograms with different buckets")
        return Histogram(self.bounds, tuple(a - b for a, b in zip(self.counts, earlier.counts, strict=True)))

    def quantile(self, q: float) -> float:
        """The ``q`` quantile, interpolated linearly inside its bucket as Prometheus's ``histogram_quantile`` does.

        An answer in the open-ended last bucket is reported as the last finite bound (a lower bound).
        """
        if not self.total:
            return math.nan
        rank = q * self.total
        lower_bound, lower_count = 0.0, 0.0
        for bound, count in zip(self.bounds, self.counts, strict=True):
            if count >= rank:
                if math.isinf(bound):
                    return lower_bound
                share = (rank - lower_count) / (count - lower_count) if count > lower_count else 1.0
                return lower_bound + (bound - lower_bound) * share
            lower_bound, lower_count = bound, count
        return lower_bound

    def max_bound(self) -> float:
        """The upper bound of the highest bucket that holds an observation: the largest is at most this (``inf``
        when it is in the open-ended bucket, 0 when there is none)."""
        if not self.total:
            return 0.0
        return next(bound for bound, count in zip(self.bounds, self.counts, strict=True) if count >= self.total)


@dataclass(frozen=True, slots=True)
class LoopLag:
    """How late vigil's event loop woke from its monitor's sleeps: the histogram, and the largest since start."""

    histogram: Histogram
    max_s: float

    def since(self, earlier: LoopLag) -> LoopLag:
        """The lags after ``earlier`` was read (the largest since start stays as it is)."""
        return LoopLag(self.histogram - earlier.histogram, self.max_s)

    def max_bound_s(self) -> float:
        """At most how late the loop woke in this window: the bound of the highest bucket with a lag in it, or the
        largest since start when that falls in the same bucket (the window's largest is then no more than it)."""
        bound = self.histogram.max_bound()
        below = max((b for b in self.histogram.bounds if b < bound), default=0.0)
        return self.max_s if below < self.max_s <= bound else bound


@dataclass(frozen=True, slots=True)
class Snapshot:
    """vigil's counters at one moment."""

    consumed: float
    handled: float
    dead_lettered: float
    processing: Histogram


def parse(text: str) -> Snapshot:
    """A ``Snapshot`` from the Prometheus text exposition."""
    totals = {CONSUMED: 0.0, DEAD_LETTERED: 0.0}
    buckets: dict[float, float] = {}
    handled = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if family.name in totals and sample.name.endswith("_total"):
                totals[family.name] += sample.value
            elif sample.name == f"{PROCESSING}_bucket":
                buckets[float(sample.labels["le"])] = sample.value
            elif sample.name == f"{PROCESSING}_count":
                handled = sample.value
    bounds = tuple(sorted(buckets))
    return Snapshot(
        consumed=totals[CONSUMED],
        handled=handled,
        dead_lettered=totals[DEAD_LETTERED],
        processing=Histogram(bounds, tuple(buckets[b] for b in bounds)),
    )


def loop_lag(text: str) -> LoopLag | None:
    """The event loop's lag from the Prometheus text exposition (None from a vigil without the monitor)."""
    buckets: dict[float, float] = {}
    largest = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == f"{LOOP_LAG}_bucket":
                buckets[float(sample.labels["le"])] = sample.value
            elif sample.name == LOOP_LAG_MAX:
                largest = sample.value
    if not buckets:
        return None
    bounds = tuple(sorted(buckets))
    return LoopLag(Histogram(bounds, tuple(buckets[b] for b in bounds)), largest)
