"""Business hours: a tenant's working week and public holidays (the holidays library), time counted in them, and the
SLA clocks and promises that count working time. On the real pipeline where a clock is armed."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from tests.progress.test_skill import say, settings
from vigil.core.clock import ManualClock
from vigil.progress.commitments import find_promises
from vigil.progress.hours import Calendar
from vigil.progress.settings import BusinessHours, ProgressSettings
from vigil.testing import wired

LONDON = ZoneInfo("Europe/London")
ENGLAND = Calendar(opens=time(9), closes=time(17, 30), region="GB-ENG")


def london(*args: int) -> datetime:
    return datetime(*args, tzinfo=LONDON)  # type: ignore[misc]


def test_working_time_stops_at_closing_and_goes_on_at_the_next_working_days_opening():
    friday_late = london(2026, 11, 27, 17, 20)  # ten minutes before closing
    assert ENGLAND.add(friday_late, 20 * 60, LONDON) == london(2026, 11, 30, 9, 10)  # Monday
    assert ENGLAND.add(london(2026, 11, 28, 11, 0), 60, LONDON) == london(2026, 11, 30, 9, 1)  # from a Saturday


def test_public_holidays_are_not_worked():
    assert not ENGLAND.working(date(2026, 12, 25)) and not ENGLAND.working(date(2026, 12, 28))  # Boxing Day moved
    christmas_eve = london(2026, 12, 24, 17, 0)
    assert ENGLAND.add(christmas_eve, 3600, LONDON) == london(2026, 12, 29, 9, 30)
    assert ENGLAND.add_days(date(2026, 12, 24), 2) == date(2026, 12, 30)
    scotland = Calendar(region="GB-SCT")  # a region's own: 2 January is a holiday there, not in England
    assert not scotland.working(date(2026, 1, 2)) and ENGLAND.working(date(2026, 1, 2))


def test_a_clock_change_in_the_night_moves_no_working_hour():
    # The clocks go back on 25 October 2026: an hour on Friday (BST), half an hour on Monday (GMT).
    assert ENGLAND.add(london(2026, 10, 23, 16, 30), 90 * 60, LONDON) == london(2026, 10, 26, 9, 30)


def test_business_hours_are_checked_when_read():
    assert BusinessHours(days=["mon", "wed"], opens=time(8), closes=time(12)).calendar().days == frozenset({0, 2})
    with pytest.raises(ValidationError, match="not a country"):
        BusinessHours(holidays="XX-YY")
    with pytest.raises(ValidationError, match="must come after"):
        BusinessHours(opens=time(18), closes=time(9))
    hours = ProgressSettings(hours={"*": BusinessHours(holidays="US")})
    assert hours.calendar("acme").region == "US" and ProgressSettings().calendar("acme") == Calendar()


def test_a_promise_of_working_days_steps_over_the_tenants_holidays():
    sent = london(2026, 12, 23, 11, 0)  # a Wednesday
    (plain,) = find_promises("I'll send the refund within 2 working days.", sent_at=sent, zone=LONDON)
    (worked,) = find_promises(
        "I'll send the refund within 2 working days.", sent_at=sent, zone=LONDON, calendar=ENGLAND
    )
    assert plain.due_at == london(2026, 12, 25, 11, 0)  # Monday to Friday only: Christmas Day counts
    assert worked.due_at == london(2026, 12, 29, 11, 0)  # Thursday 24th, then Tuesday 29th (25th, 28th off)


async def test_an_sla_target_in_working_time_falls_due_in_the_tenants_hours(tmp_path: Path):
    sla = {"*": {"*": {"first_response_s": 1800, "resolution_s": 86400, "working_time": True}}}
    hours = {"acme": {"opens": "09:00", "closes": "17:30", "holidays": "GB-ENG"}}
    config = settings(tmp_path, sla=sla, hours=hours, timezones={"*": "Europe/London"})
    friday = london(2026, 12, 24, 17, 15).astimezone(UTC)  # Christmas Eve, 15 minutes before closing
    async with wired(tmp_path, settings=config, clock=ManualClock(friday)) as vigil:
        message = say(1, "customer", "My boiler cover renewal failed", 0)
        await vigil.send(message.model_copy(update={"sent_at": friday}))
        view = await vigil.views.conversation("c-1")
        assert view is not None
        clocks = {t.kind: t.due_at for t in view.state.timers}
        assert clocks["first_response"] == london(2026, 12, 29, 9, 15)  # 15 min on the 24th, 15 after the holidays
        # 24 working hours: 0.25 on the 24th, 8.5 on the 29th and the 30th, and 6.75 on the 31st.
        assert clocks["resolution"] == london(2026, 12, 31, 15, 45)


def test_a_tenants_calendar_is_made_once_and_its_holidays_worked_out_once():
    hours = ProgressSettings(hours={"acme": BusinessHours(holidays="GB-ENG")})
    assert hours.calendar("acme") is hours.calendar("acme")  # read at every message: not built again each time
    assert hours.calendar("globex") is ProgressSettings().calendar("initech")  # the default week, shared
