"""How times are shown to people: a locale (a BCP 47 tag, ``en-GB``) and an IANA time zone (``Europe/London``).

A tenant has one display (``VIGIL_PANEL__TENANT_DISPLAY``, else the default ``VIGIL_PANEL__LOCALE`` and
``VIGIL_PANEL__TIME_ZONE``). The panel's browser code formats with ``Intl.DateTimeFormat(locale, {timeZone})``;
server-rendered times (the overview's chart ticks) use the zone through ``zoneinfo`` and the locale's hour cycle,
read from a small table (below) of CLDR's preferred hour cycles: 12-hour (``1:05 PM``) or 24-hour (``13:05``). The
server writes ``AM``/``PM`` in English and digits in ASCII whatever the locale; only the browser localises those.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache

from vigil.core.money import money

# language[-script][-region][-variant...][-extension...], the shapes of BCP 47 a browser's Intl takes.
LOCALE_TAG = re.compile(
    r"(?P<language>[a-z]{2,3}|[a-z]{5,8})"
    r"(?:-(?P<script>[a-z]{4}))?"
    r"(?:-(?P<region>[a-z]{2}|[0-9]{3}))?"
    r"(?:-(?:[a-z0-9]{5,8}|[0-9][a-z0-9]{3}))*"
    r"(?P<extensions>(?:-[a-wy-z0-9](?:-[a-z0-9]{2,8})+)*)"
    r"(?:-x(?:-[a-z0-9]{1,8})+)?",
    re.IGNORECASE,
)
# Regions whose people read 12-hour time (CLDR's preferred hour cycle "h"), and the languages that do when a tag
# names no region. Checked against Chromium's Intl in tests/e2e/test_panel_browser.py.
H12_REGIONS = frozenset(
    {"US", "CA", "AU", "NZ", "IN", "PH", "SG", "MX", "TW", "HK", "KR", "EG", "SA", "AE", "PK", "BD", "MY", "GR", "001"}
)
H12_LANGUAGES = frozenset({"en", "ko", "ar", "hi", "bn", "ur", "el", "ms"})
H23_EXCEPTIONS = frozenset({("fr", "CA")})  # French in Canada reads 24-hour time, English there 12-hour
_HOUR_CYCLE = re.compile(r"-u(?:-[a-z0-9]{2,8})*?-hc-(h11|h12|h23|h24)(?:-|$)", re.IGNORECASE)


def locale_problem(tag: str) -> str | None:
    """Why ``tag`` is not a locale the panel can use, or None when it is one."""
    if not LOCALE_TAG.fullmatch(tag):
        return f"{tag!r} is not a BCP 47 locale tag (e.g. en-GB, en-US, de-DE)"
    return None


def zone_problem(name: str) -> str | None:
    """Why ``name`` is not a time zone the panel can use, or None when it is one (an IANA name zoneinfo knows)."""
    if name not in _zones():
        return f"{name!r} is not an IANA time zone (e.g. Europe/London, America/New_York, UTC)"
    return None


@cache
def _zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


@dataclass(frozen=True, slots=True)
class Display:
    """One way of showing times and money: a locale, a time zone and a currency (all checked by the settings)."""

    locale: str = "en-GB"
    time_zone: str = "UTC"
    currency: str | None = None
    """The tenant's money (ISO 4217); None: amounts are written without one."""

    def money(self, cents: int) -> str:
        """An amount in the tenant's currency: "£62.49", "-$10.00", "12.50 CHF"; without one, "62.49"."""
        return money(cents, self.currency)

    @property
    def zone(self) -> zoneinfo.ZoneInfo:
        return zoneinfo.ZoneInfo(self.time_zone)

    @property
    def hour12(self) -> bool:
        """Whether the locale reads 12-hour time: a ``-u-hc-`` extension says so, else its region, else its
        language (see ``H12_REGIONS``)."""
        found = LOCALE_TAG.fullmatch(self.locale)
        if found is None:
            return False
        cycle = _HOUR_CYCLE.search(found.group("extensions") or "")
        if cycle:
            return cycle.group(1).lower() in {"h11", "h12"}
        language, region = found.group("language").lower(), (found.group("region") or "").upper()
        if region:
            return region in H12_REGIONS and (language, region) not in H23_EXCEPTIONS
        return language in H12_LANGUAGES

    def local(self, t: datetime) -> datetime:
        """``t`` (aware) in this display's zone."""
        return t.astimezone(self.zone)

    def clock(self, t: datetime, *, seconds: bool = False) -> str:
        """The time of day: ``14:05`` (24-hour), ``2:05 PM`` (12-hour); ``14:05:09`` with ``seconds``."""
        here = self.local(t)
        sec = f":{here.second:02d}" if seconds else ""
        if self.hour12:
            return f"{(here.hour % 12) or 12}:{here.minute:02d}{sec} {'AM' if here.hour < 12 else 'PM'}"
        return f"{here:%H:%M}{sec}"

    def stamp(self, t: datetime, *, seconds: bool = False) -> str:
        """A date and time with the zone's abbreviation: ``2026-07-01 14:05 BST``."""
        here = self.local(t)
        return f"{here:%Y-%m-%d} {self.clock(t, seconds=seconds)} {here.tzname()}"

    def as_json(self) -> dict[str, str]:
        """What the panel's browser code takes: ``{"locale", "time_zone"}``."""
        return {"locale": self.locale, "time_zone": self.time_zone}


UTC_DISPLAY = Display()


@dataclass(frozen=True, slots=True)
class Displays:
    """Each tenant's display: those configured, and the default for every other tenant."""

    default: Display = UTC_DISPLAY
    tenants: Mapping[str, Display] | None = None

    def of(self, tenant: str) -> Display:
        """The display of ``tenant``'s times."""
        return (self.tenants or {}).get(tenant, self.default)

    def of_person(self, tenants: Iterable[str]) -> Display:
        """The display of a person's pages that show no one tenant (the overview): their first tenant's; for a person
        of every tenant (``"*"``) the default."""
        first = next(iter(tenants), "*")
        return self.default if first == "*" else self.of(first)

    def as_json(self, visible: Iterable[str] | None = None) -> dict[str, object]:
        """The default and the configured tenants' displays (only those of ``visible``, unless None: all), for the
        browser."""
        shown = set(visible) if visible is not None else None
        tenants = {t: d.as_json() for t, d in (self.tenants or {}).items() if shown is None or t in shown}
        return {"default": self.default.as_json(), "tenants": tenants}
