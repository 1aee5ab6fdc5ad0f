"""Business hours: a tenant's working week and public holidays, and time counted in them.

A ``Calendar`` is the days of the week a tenant's team works, the hours of those days (in the tenant's zone) and the
public holidays of its country or region (the maintained ``holidays`` library: ``"GB-ENG"`` is England's, ``"DE-BY"``
Bavaria's, ``"US"`` the federal ones). An SLA target that counts working time (``Targets.working_time``) runs only in
those hours, and a promise "within 2 working days" steps over weekends and holidays (vigil/progress/due.py).

Time is counted on the local wall clock: an hour of work is an hour between the day's opening and closing times, so a
clock change in the night moves nothing; a moment that does not exist locally (the hour skipped in spring) is read
as the one after it, and one that exists twice as the first.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import cached_property
from typing import Any
from zoneinfo import ZoneInfo

import holidays

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def holiday_problem(region: str) -> str | None:
    """Why ``region`` ("GB-ENG", "US", "DE-BY") names no holiday calendar, or None when it names one."""
    country, _, subdivision = region.partition("-")
    try:
        holidays.country_holidays(country, subdiv=subdivision or None)
    except NotImplementedError:
        return f"{region!r} is not a country (or country-region) the holidays library knows (e.g. GB-ENG, US, DE-BY)"
    return None


@dataclass(frozen=True)
class Calendar:
    """A working week (``days``, 0 Monday, from ``opens`` to ``closes`` local time) and the public holidays of
    ``region`` (None: none)."""

    days: frozenset[int] = frozenset(range(5))
    opens: time = time(9)
    closes: time = time(17)
    region: str | None = None

    @cached_property
    def _holidays(self) -> Any:
        if self.region is None:
            return None
        country, _, subdivision = self.region.partition("-")
        return holidays.country_holidays(country, subdiv=subdivision or None)

    def working(self, day: date) -> bool:
        """Whether ``day`` is a working day: one of the week's, and not a public holiday."""
        return day.weekday() in self.days and not (self._holidays is not None and day in self._holidays)

    def add_days(self, day: date, n: int) -> date:
        """The ``n``-th working day after ``day``."""
        for _ in range(3660):  # a working week has a working day in every ten years
            if n <= 0:
                return day
            day += timedelta(days=1)
            if self.working(day):
                n -= 1
        raise ValueError("no working day in ten years: the calendar has no working days")

    def next_opening(self, local: datetime) -> datetime:
        """The first moment of working time at or after ``local`` (naive local time)."""
        day, at = local.date(), local.time()
        for _ in range(3660):
            if self.working(day) and at < self.closes:
                return datetime.combine(day, max(at, self.opens))
            day, at = day + timedelta(days=1), time(0)
        raise ValueError("no working time in ten years: the calendar has no working days")

    def add_local(self, start: datetime, span: timedelta) -> datetime:
        """``span`` of working time after ``start`` (naive local times)."""
        at, left = self.next_opening(start), span
        while True:
            today = datetime.combine(at.date(), self.closes) - at
            if left <= today:
                return at + left
            left -= today
            at = self.next_opening(datetime.combine(at.date() + timedelta(days=1), time(0)))

    def add(self, start: datetime, seconds: float, zone: ZoneInfo) -> datetime:
        """``seconds`` of working time after ``start`` (aware), as the team in ``zone`` works: in UTC."""
        local = start.astimezone(zone).replace(tzinfo=None)
        end = self.add_local(local, timedelta(seconds=seconds))
        return _aware(end, zone).astimezone(UTC)


def _aware(local: datetime, zone: ZoneInfo) -> datetime:
    """A naive local time in ``zone``: the first of two that exist (fold 0), or past a gap (read in the old offset)."""
    moment = local.replace(tzinfo=zone)
    back = moment.astimezone(UTC).astimezone(zone).replace(tzinfo=None)
    return moment if back == local else moment.astimezone(UTC).astimezone(zone)


@functools.cache
def calendar(days: frozenset[int], opens: time, closes: time, region: str | None) -> Calendar:
    """The calendar of these hours, one per process: its holidays are worked out once, not at every message."""
    return Calendar(days=days, opens=opens, closes=closes, region=region)


WEEKDAYS_NINE_TO_FIVE = Calendar()
"""Monday to Friday, 09:00-17:00, no holidays known: how promises' working days read without a tenant's calendar."""
