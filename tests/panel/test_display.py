"""Times as a tenant reads them: its locale's 12- or 24-hour clock, in its time zone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from vigil.panel.display import Display, Displays, locale_problem, zone_problem

SUMMER = datetime(2026, 7, 1, 13, 5, tzinfo=UTC)
WINTER = datetime(2026, 1, 15, 13, 5, tzinfo=UTC)
UK = Display("en-GB", "Europe/London")
US = Display("en-US", "America/New_York")


def test_a_uk_tenant_reads_24_hour_london_time_and_a_us_tenant_12_hour_new_york_time():
    assert (UK.clock(SUMMER), UK.clock(WINTER)) == ("14:05", "13:05")  # BST, then GMT
    assert (US.clock(SUMMER), US.clock(WINTER)) == ("9:05 AM", "8:05 AM")  # EDT, then EST
    assert UK.stamp(SUMMER) == "2026-07-01 14:05 BST"
    assert US.stamp(WINTER) == "2026-01-15 8:05 AM EST"


def test_midnight_and_noon_on_a_12_hour_clock():
    utc_us = Display("en-US", "UTC")
    assert utc_us.clock(datetime(2026, 7, 1, 0, 30, tzinfo=UTC)) == "12:30 AM"
    assert utc_us.clock(datetime(2026, 7, 1, 12, 0, tzinfo=UTC)) == "12:00 PM"
    assert Display("en-GB", "UTC").clock(datetime(2026, 7, 1, 0, 30, tzinfo=UTC)) == "00:30"


@pytest.mark.parametrize(
    ("locale", "hour12"),
    [
        ("en", True),
        ("en-US", True),
        ("en-GB", False),
        ("en-IE", False),
        ("en-CA", True),
        ("fr-CA", False),
        ("en-AU", True),
        ("en-IN", True),
        ("de-DE", False),
        ("fr", False),
        ("es-MX", True),
        ("ja-JP", False),
        ("zh-TW", True),
        ("zh-CN", False),
        ("ko", True),
        ("en-Latn-US", True),
        ("en-GB-u-hc-h12", True),  # the tag's own hour cycle wins
        ("en-US-u-hc-h23", False),
    ],
)
def test_the_hour_cycle_follows_the_locale(locale: str, hour12: bool):
    assert Display(locale, "UTC").hour12 is hour12


@pytest.mark.parametrize("tag", ["en-GB", "en", "de-DE", "zh-Hant-TW", "es-419", "en-US-u-hc-h23", "sr-Latn-RS"])
def test_bcp_47_tags_are_taken(tag: str):
    assert locale_problem(tag) is None


@pytest.mark.parametrize("tag", ["en_GB", "english!", "e", "en-GB-", "", "en GB", "12-GB", "en-GB;DROP"])
def test_malformed_locale_tags_are_refused(tag: str):
    assert locale_problem(tag) is not None


def test_only_iana_zones_zoneinfo_knows_are_taken():
    assert zone_problem("Europe/London") is None and zone_problem("UTC") is None
    for bad in ("Europe/Lundun", "BST", "", "../../etc/passwd", "+01:00"):
        assert zone_problem(bad) is not None, bad


def test_a_tenant_without_a_display_of_its_own_has_the_default():
    displays = Displays(Display("en-GB", "UTC"), {"acme-uk": UK, "acme-us": US})
    assert displays.of("acme-uk") == UK and displays.of("other") == Display("en-GB", "UTC")
    assert displays.of_person(["acme-us", "acme-uk"]) == US  # their first tenant's
    assert displays.of_person(["*"]) == displays.default
    shown = displays.as_json(["acme-uk"])  # the browser learns only the tenants the person may see
    assert shown == {"default": {"locale": "en-GB", "time_zone": "UTC"}, "tenants": {"acme-uk": UK.as_json()}}
