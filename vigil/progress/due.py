"""Due times: when a promise falls due, from the time words of its clause (bench/data/README.md, "Conventions").

The due time is the latest moment at which the promise is still kept (bench/data/README.md, "Conventions"), in the
customer's zone unless the text names one ("2pm Eastern", "10 Madrid time", "your time"):

- durations: "in 30 minutes", "within 2 hours", "within the hour", and before the promise "give me 30 minutes (and
  I'll...)", "allow 48 hours", are elapsed time from sending; "in N days" and "in N weeks" are that many calendar
  days later at the same local clock time;
- working days and hours, by the tenant's business hours (vigil/progress/hours.py; without them, 09:00-17:00, Monday
  to Friday, no holidays): "within N working days" steps over the days not worked (weekends, public holidays) at the
  same clock time; "next business day" is the next working day at closing time; "within N business hours" counts
  the hours worked;
- days: "today", "tomorrow", a weekday (the next such day after the day of sending; "next Tuesday" and "the
  following Tuesday" the Tuesday of the next calendar week; "this Friday" said on a Friday, that day), a calendar
  date ("21 May", "November 2", "the 18th", parsed by dateparser);
- times: a clock time ("by 3pm", "at quarter to 4", "at 9:30"; a bare hour is 9-11 am, 12 noon, 1-8 pm), "first
  thing" 09:00, "midnight" 00:00 ending the day named (tonight's: the next day's 00:00), "morning" 12:00,
  "noon"/"lunchtime" 12:00, "afternoon" 17:00, "tonight"/"this evening" 21:00, and a day without a time 17:00; "end
  of day" and "close of business" 17:00 today; "this week" and "end of the week" Friday 17:00, "next week" the
  Friday after; "now" and "right away" the moment of sending;
- vague ("soon", "as soon as I hear back", "in a few days") or no time at all: ``due_at`` is None.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, available_timezones

import dateparser

from vigil.progress.hours import WEEKDAYS_NINE_TO_FIVE, Calendar

DAY_END = time(17)
"""The time of a promise that names a day and no time ("on Friday", "tomorrow", "end of day")."""

_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "twelve": 12, "a couple of": 2, "couple of": 2, "half an": 0.5, "half a": 0.5,
}  # fmt: skip
_COUNT = (
    r"(?P<n>\d+(?:\.\d+)?|an?|one|two|three|four|five|six|seven|eight|nine|ten|twelve|a couple of|couple of|half an?)"
)
_DURATION = re.compile(
    rf"\b(?:in|within)\s+(?:the\s+next\s+)?{_COUNT}\s*(?P<unit>minutes?|mins?|hours?|hrs?|days?|weeks?)"
    r"(?P<half>\s+and\s+a\s+half)?\b",
    re.IGNORECASE,
)
_WITHIN_THE_HOUR = re.compile(r"\bwithin the (?:next )?hour\b", re.IGNORECASE)
_WORKING = re.compile(
    rf"\b(?:in|within)\s+(?:the\s+next\s+)?{_COUNT}\s+(?:working|business)\s+(?P<unit>days?|hours?)\b", re.IGNORECASE
)
_NEXT_WORKING_DAY = re.compile(r"\bnext (?:working|business) day\b", re.IGNORECASE)
_NOW = re.compile(r"\b(?:right now|now|right away|straight away|immediately)\b", re.IGNORECASE)
_END_OF_DAY = re.compile(
    r"\b(?:(?:the )?end of (?:the |to)?day|close of (?:business|play)|end of play|COB|EOD|later today|today)\b",
    re.IGNORECASE,
)
_THIS_WEEK = re.compile(r"\b(?:(?:the )?end of (?:the|this) week|this week)\b", re.IGNORECASE)
_NEXT_WEEK = re.compile(r"\b(?:(?:the )?end of next week|next week)\b", re.IGNORECASE)
_TOMORROW = re.compile(r"\btomorrow\b(?!'s)", re.IGNORECASE)
"""Tomorrow as a day, not a thing of tomorrow's ("a hold on tomorrow's direct debit today")."""
_MIDNIGHT = re.compile(r"\b(?:at|by|before)\s+midnight\b", re.IGNORECASE)
_LEAD_DURATION = re.compile(
    rf"\b(?:give (?:me|us)|allow|expect)\s+(?:the\s+next\s+)?{_COUNT}\s*"
    r"(?P<unit>minutes?|mins?|hours?|hrs?|days?|weeks?)(?P<half>\s+and\s+a\s+half)?\b",
    re.IGNORECASE,
)
"""A duration before the promise: "Give me 30 minutes and I'll...", "allow 48 hours and..." (elapsed time)."""
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAY = re.compile(
    r"\b(?:(?P<following>the following\s+)|(?P<next>next\s+)|(?P<this>this\s+))?"
    r"(?P<day>(?:mon|tues|wednes|thurs|fri|satur|sun)day)\b",
    re.I,
)
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*"
_DATE = re.compile(
    rf"\b(?:(?:mon|tues|wednes|thurs|fri|satur|sun)day,?\s+)?(?:\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}"
    rf"|{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?(?!\d|:|\s*(?:am|pm))|the\s+\d{{1,2}}(?:st|nd|rd|th)(?:\s+of\s+{_MONTH})?)\b",
    re.IGNORECASE,
)
_CLOCK = re.compile(
    r"\b(?:(?P<prep>at|by|before|until|till|for)\s+(?:about\s+|around\s+)?)?(?P<part>quarter (?:to|past)|half past)?"
    r"\s*(?P<h>\d{1,2})(?:[:.](?P<m>\d{2}))?\s*(?P<ampm>[ap]\.?m\b\.?)?"
    rf"(?!\s*(?:minutes?|mins?|hours?|hrs?|days?|weeks?|working|business|st|nd|rd|th|(?:of\s+)?{_MONTH})\b|\s*[%\d])",
    re.IGNORECASE,
)
_DAY_PART = re.compile(
    r"\b(?:(?P<first>first thing)|(?P<noon>midday|noon|lunchtime|lunch)|(?P<morning>morning)"
    r"|(?P<afternoon>afternoon|arvo|after lunch)|(?P<evening>tonight|this evening))\b",
    re.IGNORECASE,
)
_ZONES = {
    "eastern": "America/New_York", "central": "America/Chicago", "mountain": "America/Denver",
    "pacific": "America/Los_Angeles", "uk": "Europe/London", "london": "Europe/London", "sydney": "Australia/Sydney",
    "melbourne": "Australia/Melbourne", "perth": "Australia/Perth", "brisbane": "Australia/Brisbane",
    "adelaide": "Australia/Adelaide", "gmt": "Europe/London", "bst": "Europe/London",
}  # fmt: skip
_ZONE = re.compile(r"\b(?P<zone>eastern|central|mountain|pacific|uk|london|sydney|melbourne|perth|brisbane|adelaide"
                   r"|gmt|bst)(?:\s+time)?\b", re.IGNORECASE)  # fmt: skip
_CITY_TIME = re.compile(r"\b(?P<city>[A-Z][a-z]+(?: [A-Z][a-z]+)?) time\b")
"""A zone named by its city: "10 Madrid time", "3pm New York time" (any city the zone database names a zone by)."""


@functools.cache
def _city_zones() -> dict[str, str]:
    """Each city of the zone database ("madrid", "new york") and its zone; the first when several name one."""
    cities: dict[str, str] = {}
    for name in sorted(available_timezones()):
        if "/" in name and not name.startswith(("Etc/", "SystemV/", "US/")):
            cities.setdefault(name.rsplit("/", 1)[1].replace("_", " ").lower(), name)
    return cities


def _named_zone(clause: str) -> ZoneInfo | None:
    """The zone the clause names ("2pm Eastern", "3pm UK time", "10 Madrid time"), if any."""
    named = _ZONE.search(clause)
    if named is not None:
        return ZoneInfo(_ZONES[named.group("zone").lower()])
    for city in _CITY_TIME.finditer(clause):
        zone = _city_zones().get(city.group("city").lower())
        if zone is not None:
            return ZoneInfo(zone)
    return None


TIME_WORDS = (_DURATION, _WITHIN_THE_HOUR, _WORKING, _NEXT_WORKING_DAY, _END_OF_DAY, _THIS_WEEK, _NEXT_WEEK,
               _TOMORROW, _DATE, _DAY_PART, _WEEKDAY, _ZONE, _CITY_TIME,
               re.compile(r"\b(?:at|by|before)\s+(?:quarter (?:to|past)\s+|half past\s+)?\d{1,2}(?:[:.]\d{2})?"
                          r"\s*(?:[ap]\.?m\b\.?)?(?:\s+sharp)?", re.I),
               re.compile(r"\b(?:your time|on|by|at|in)\s*$", re.I))  # fmt: skip


_DUE_WORDS = (_DURATION, _WITHIN_THE_HOUR, _WORKING, _NEXT_WORKING_DAY, _NOW, _END_OF_DAY, _THIS_WEEK, _NEXT_WEEK,
              _TOMORROW, _WEEKDAY, _DATE, _DAY_PART)  # fmt: skip
"""Words that fix a due time, but for clock times (``_is_clock`` on ``_CLOCK``): "once it's done" is none."""


def has_time(clause: str) -> bool:
    """Whether a clause names its own due time."""
    return any(p.search(clause) for p in _DUE_WORDS) or any(_is_clock(m) for m in _CLOCK.finditer(clause))


def _is_clock(match: re.Match[str]) -> bool:
    return bool(match.group("prep") or match.group("ampm") or match.group("m") or match.group("part"))


def _count(text: str) -> float:
    return float(text) if text[0].isdigit() else _NUMBERS[text.lower()]


class Times:
    """The time words of one promise's clause, and the due time they give (the README's conventions)."""

    def __init__(
        self, clause: str, before: str, sent_at: datetime, zone: ZoneInfo, calendar: Calendar = WEEKDAYS_NINE_TO_FIVE
    ) -> None:
        self.clause, self.before, self.sent_at = clause, before, sent_at.astimezone(UTC)
        self.calendar = calendar
        self.zone = _named_zone(clause) or zone
        self.local = self.sent_at.astimezone(self.zone)

    def due_at(self) -> datetime | None:
        for rule in (self._elapsed, self._working, self._week, self._day_and_time):
            due = rule()
            if due is not None:
                return due.astimezone(UTC)
        return None

    def _at(self, day: date, clock: time) -> datetime:
        return datetime.combine(day, clock, tzinfo=self.zone)

    def _elapsed(self) -> datetime | None:
        if _WITHIN_THE_HOUR.search(self.clause):
            return self.sent_at + timedelta(hours=1)
        match = _DURATION.search(self.clause) or _LEAD_DURATION.search(self.before)
        if match is None:
            now = _NOW.search(self.clause) and not has_time(_NOW.sub(" ", self.clause))
            return self.sent_at if now else None
        n = _count(match.group("n")) + (0.5 if match.group("half") else 0)
        unit = match.group("unit").lower()
        if unit.startswith("m"):
            return self.sent_at + timedelta(minutes=n)
        if unit.startswith("h"):
            return self.sent_at + timedelta(hours=n)
        days = n * 7 if unit.startswith("w") else n
        return self._at(self.local.date() + timedelta(days=days), self.local.time().replace(tzinfo=None))

    def _working(self) -> datetime | None:
        if _NEXT_WORKING_DAY.search(self.clause):
            return self._at(self.calendar.add_days(self.local.date(), 1), self.calendar.closes)
        match = _WORKING.search(self.clause)
        if match is None:
            return None
        n = int(_count(match.group("n")))
        if match.group("unit").lower().startswith("h"):
            end = self.calendar.add_local(self.local.replace(tzinfo=None), timedelta(hours=n))
            return end.replace(tzinfo=self.zone)
        return self._at(self.calendar.add_days(self.local.date(), n), self.local.time().replace(tzinfo=None))

    def _week(self) -> datetime | None:
        today = self.local.date()
        friday = today + timedelta(days=4 - today.weekday())
        if _NEXT_WEEK.search(self.clause):
            return self._at(friday + timedelta(days=7), DAY_END)
        if _THIS_WEEK.search(self.clause):
            return self._at(friday if friday >= today else friday + timedelta(days=7), DAY_END)
        return None

    def _day_and_time(self) -> datetime | None:
        if _MIDNIGHT.search(self.clause):  # the end of the day it names: 00:00 of the day after
            return self._at((self._day() or self.local.date()) + timedelta(days=1), time(0))
        day = self._day()
        clock = self._clock()
        if day is None and clock is None:
            return self._at(self.local.date(), DAY_END) if _END_OF_DAY.search(self.clause) else None
        due = self._at(day or self.local.date(), clock or DAY_END)
        if day is None and due < self.sent_at:
            due = self._at(self.local.date() + timedelta(days=1), clock or DAY_END)
        return due

    def _day(self) -> date | None:
        today = self.local.date()
        found = _DATE.search(self.clause)
        if found is None and re.search(r"\bthat (?:morning|afternoon|day)\b", self.clause, re.I):
            found = _DATE.search(self.before)
        if found is not None:
            return _calendar_date(found.group(), self.local)
        if _TOMORROW.search(self.clause):
            return today + timedelta(days=1)
        weekday = _WEEKDAY.search(self.clause)
        if weekday is not None:
            target = _WEEKDAYS.index(weekday.group("day").lower())
            if weekday.group("following") or weekday.group("next"):  # that day of the week after this one
                return today + timedelta(days=7 - today.weekday() + target)
            if weekday.group("this") and target == today.weekday():  # "this Friday", said on a Friday: today
                return today
            return today + timedelta(days=(target - today.weekday() - 1) % 7 + 1)
        return None

    def _clock(self) -> time | None:
        part = _DAY_PART.search(self.clause)
        for match in _CLOCK.finditer(self.clause):
            if _is_clock(match):
                return _clock_time(match, part.lastgroup if part else None)
        if part is None:
            return None
        return {"first": time(9), "noon": time(12), "morning": time(12), "afternoon": DAY_END, "evening": time(21)}[
            str(part.lastgroup)
        ]


def _clock_time(match: re.Match[str], part: str | None) -> time:
    """A clock time: "3pm", "9:30", "quarter to 4"; a bare hour is read in working hours (9-11 am, 12, 1-8 pm), or in
    the evening when the clause says "tonight"."""
    hour, minute = int(match.group("h")), int(match.group("m") or 0)
    ampm = (match.group("ampm") or "").lower()[:1]
    pm = (part not in ("first", "morning") and 1 <= hour <= 8) or (part == "evening" and hour < 12)  # "9 tonight"
    if (ampm == "p" and hour < 12) or (not ampm and pm):
        hour += 12
    elif ampm == "a" and hour == 12:
        hour = 0
    clock = datetime(2000, 1, 1, hour % 24, minute)
    relation = (match.group("part") or "").lower()
    if relation == "quarter to":
        clock -= timedelta(minutes=15)
    elif relation == "quarter past":
        clock += timedelta(minutes=15)
    elif relation == "half past":
        clock += timedelta(minutes=30)
    return clock.time()


def _calendar_date(phrase: str, local: datetime) -> date | None:
    """A calendar date ("21 May", "November 2", "the 18th"), the next one on or after the day of sending."""
    parsed = dateparser.parse(
        phrase,
        languages=["en"],
        settings={"RELATIVE_BASE": local.replace(tzinfo=None), "PREFER_DATES_FROM": "future", "DATE_ORDER": "DMY"},
    )
    if parsed is None:
        return None
    day = parsed.date()
    if day < local.date():  # dateparser keeps a bare "the 2nd" in the month of sending, even when it has passed
        named_month = re.search(rf"\b{_MONTH}\b", phrase, re.IGNORECASE)
        day = day.replace(year=day.year + 1) if named_month else _next_month(day)
    return day


def _next_month(day: date) -> date:
    """The same day of the next month that has it ("the 31st" in April is 31 May)."""
    year, month = day.year, day.month
    while True:
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
        try:
            return day.replace(year=year, month=month)
        except ValueError:
            continue
