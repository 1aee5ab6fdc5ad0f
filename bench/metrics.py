"""Reading vigil's ``/metrics``: event counters and the processing-time histogram, and quantiles from it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

CONSUMED = "vigil_events_consumed"
DEAD_LETTERED = "vigil_events_dead_lettered"
PROCESSING = "vigil_event_processing_seconds"


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
