"""The progress section of the settings (``VIGIL_PROGRESS__*``): SLA targets, business hours, reminders, time
zones."""

from __future__ import annotations

from datetime import time
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field, field_validator, model_validator

from vigil.core.settings import checked
from vigil.progress import hours
from vigil.progress.hours import WEEKDAYS, WEEKDAYS_NINE_TO_FIVE, Calendar, holiday_problem

ANY = "*"
"""In ``sla`` and ``timezones``: every tenant (or priority) not named."""


class Targets(BaseModel):
    """How long a case may wait, in seconds, for each SLA clock (None: that clock does not run)."""

    first_response_s: float | None = Field(default=None, gt=0)
    next_response_s: float | None = Field(default=None, gt=0)
    resolution_s: float | None = Field(default=None, gt=0)
    working_time: bool = Field(
        default=False,
        description="Count these targets in the tenant's business hours (HOURS) only; false: round the clock.",
    )


Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
_WORKWEEK: tuple[Weekday, ...] = ("mon", "tue", "wed", "thu", "fri")


class BusinessHours(BaseModel):
    """A tenant's working week, in its time zone (``timezones``), and the public holidays it does not work."""

    model_config = {"extra": "forbid"}

    days: list[Weekday] = Field(default_factory=lambda: list(_WORKWEEK))
    opens: time = Field(default=time(9), description="Local time the day's work starts, e.g. 09:00.")
    closes: time = Field(default=time(17), description="Local time it ends, e.g. 17:30.")
    holidays: str | None = Field(
        default=None,
        description='The public holidays not worked: a country, or country-region, e.g. "GB-ENG", "US", "DE-BY" '
        "(the holidays library); none: every listed day is worked.",
    )

    _known_region = field_validator("holidays")(checked(holiday_problem))

    @model_validator(mode="after")
    def _a_working_day(self) -> BusinessHours:
        if not self.days:
            raise ValueError("a working week needs at least one day")
        if self.closes <= self.opens:
            raise ValueError(f"closes ({self.closes}) must come after opens ({self.opens}) on the same day")
        return self

    def calendar(self) -> Calendar:
        days = frozenset(WEEKDAYS.index(d) for d in self.days)
        return hours.calendar(days, self.opens, self.closes, self.holidays)


DEFAULT_SLA: dict[str, dict[str, Targets]] = {
    ANY: {
        "urgent": Targets(first_response_s=120, next_response_s=300, resolution_s=4 * 3600),
        "high": Targets(first_response_s=300, next_response_s=600, resolution_s=8 * 3600),
        ANY: Targets(first_response_s=600, next_response_s=1800, resolution_s=24 * 3600),
        "low": Targets(first_response_s=1800, next_response_s=3600, resolution_s=72 * 3600),
    }
}
"""Chat targets: first response, next response while the customer waits, resolution (from the case's opening)."""


class ProgressSettings(BaseModel):
    """Case states, SLA timers, commitments and their reminders, escalation, handover, next steps."""

    enabled: bool = Field(default=True, description="Track each case's progress and remind the analyst.")
    sla: dict[str, dict[str, Targets]] = Field(
        default_factory=lambda: {t: dict(p) for t, p in DEFAULT_SLA.items()},
        description='SLA targets by tenant, then priority, in seconds; "*" is every tenant or priority not named. '
        'JSON, e.g. {"acme": {"urgent": {"first_response_s": 60}, "*": {"resolution_s": 86400}}}.',
    )
    warn_before_s: float = Field(
        default=300.0,
        ge=0,
        description="How long before an SLA target vigil warns the analyst (a follow_up suggestion); never more than "
        "half the target, so a short target is not warned of the moment it starts.",
    )
    remind_before_s: float = Field(
        default=900.0,
        ge=0,
        description="How long before a commitment falls due vigil reminds the analyst; at most half the time "
        "between the promise and its due time.",
    )
    timezones: dict[str, str] = Field(
        default_factory=dict,
        description="Each tenant's customers' time zone (IANA name), for promises like \"tomorrow morning\"; "
        'a message\'s metadata "timezone" wins. "*" for every tenant not named.',
    )
    default_timezone: str = Field(default="UTC", description="The time zone of a tenant not in timezones.")
    hours: dict[str, BusinessHours] = Field(
        default_factory=dict,
        description="Each tenant's business hours, for SLA targets that count working time and promises of working "
        'days; "*" for every tenant not named. JSON, e.g. {"acme": {"days": ["mon", "tue", "wed", "thu", "fri"], '
        '"opens": "09:00", "closes": "17:30", "holidays": "GB-ENG"}}. A tenant without: Monday to Friday, 09:00-17:00, '
        "no holidays.",
    )
    sweep_s: float = Field(default=0.5, gt=0, description="How often each replica looks for timers that have come due.")
    lease_s: float = Field(
        default=30.0, gt=0, description="How long a replica holds a timer it is firing before another may."
    )

    procedures_interval_s: float = Field(
        default=3600.0, gt=0, description="How often procedures are mined again from the resolved cases."
    )
    procedures_window: int = Field(
        default=5000, ge=1, description="How many of a tenant's latest resolved cases its procedures are mined from."
    )
    procedures_min_cases: int = Field(
        default=20,
        ge=1,
        description="A procedure mined from fewer resolved cases than this is kept but not followed: too thin to "
        "say what comes next.",
    )
    procedures_refresh_s: float = Field(
        default=300.0, gt=0, description="How long a replica uses the procedures it read before reading them again."
    )
    next_step_min_confidence: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="Suggest the next step only when the procedure and the step together are at least this likely "
        "(on STAR, the top step is the one taken 60% of the time: docs/evaluation.md).",
    )

    @field_validator("sla")
    @classmethod
    def _priorities_any_case(cls, value: dict[str, dict[str, Targets]]) -> dict[str, dict[str, Targets]]:
        """Priorities are matched whatever their case ("P1" and "p1" are one)."""
        return {tenant: {p.lower(): t for p, t in by_priority.items()} for tenant, by_priority in value.items()}

    @field_validator("timezones")
    @classmethod
    def _zones_exist(cls, value: dict[str, str]) -> dict[str, str]:
        for tenant, zone in value.items():
            _zone(zone, f"timezones[{tenant}]")
        return value

    @field_validator("default_timezone")
    @classmethod
    def _zone_exists(cls, value: str) -> str:
        _zone(value, "default_timezone")
        return value

    def zone(self, tenant: str) -> ZoneInfo:
        """The time zone of ``tenant``'s customers."""
        return ZoneInfo(self.timezones.get(tenant) or self.timezones.get(ANY) or self.default_timezone)

    def calendar(self, tenant: str) -> Calendar:
        """``tenant``'s business hours (the default week, 09:00-17:00 Monday to Friday, when none are set)."""
        found = self.hours.get(tenant) or self.hours.get(ANY)
        return found.calendar() if found is not None else WEEKDAYS_NINE_TO_FIVE

    def targets(self, tenant: str, priority: str | None) -> Targets:
        """The SLA targets of a case of ``tenant`` at ``priority``: the most specific named, clock by clock."""
        merged: dict[str, float | bool | None] = {}
        for t in (ANY, tenant):
            by_priority = self.sla.get(t)
            if by_priority is None:
                continue
            for p in (ANY, (priority or "").lower()):
                targets = by_priority.get(p)
                if targets is not None:
                    merged |= {k: v for k, v in targets.model_dump().items() if k in targets.model_fields_set or v}
        return Targets(**merged)


def _zone(name: str, where: str) -> None:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"{where}: {name!r} is not a time zone") from exc
