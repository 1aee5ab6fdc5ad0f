"""The progress section of the settings: SLA targets by tenant and priority, time zones."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from vigil.app.settings import Settings
from vigil.progress.settings import ProgressSettings


def test_targets_are_the_most_specific_named_clock_by_clock():
    settings = ProgressSettings(
        sla={
            "*": {"*": {"first_response_s": 600, "resolution_s": 86400}, "P1": {"first_response_s": 60}},
            "acme": {"p1": {"resolution_s": 3600}, "*": {"next_response_s": 900}},
        }
    )
    acme_p1 = settings.targets("acme", "P1")
    assert (acme_p1.first_response_s, acme_p1.next_response_s, acme_p1.resolution_s) == (60, 900, 3600)
    other = settings.targets("globex", None)
    assert (other.first_response_s, other.next_response_s, other.resolution_s) == (600, None, 86400)


def test_a_clock_set_to_none_for_a_tenant_does_not_run_for_it():
    settings = ProgressSettings(sla={"*": {"*": {"resolution_s": 86400}}, "acme": {"*": {"resolution_s": None}}})
    assert settings.targets("acme", None).resolution_s is None
    assert settings.targets("globex", None).resolution_s == 86400


def test_the_defaults_are_chat_targets_by_priority():
    settings = ProgressSettings()
    assert settings.targets("any", "urgent").first_response_s == 120
    assert settings.targets("any", "Normal").first_response_s == 600


def test_time_zones_come_from_the_tenant_then_the_star_then_the_default():
    settings = ProgressSettings(timezones={"acme": "Europe/London", "*": "America/New_York"})
    assert settings.zone("acme").key == "Europe/London" and settings.zone("globex").key == "America/New_York"
    assert ProgressSettings().zone("x").key == "UTC"


def test_an_unknown_time_zone_is_refused_at_start_up():
    with pytest.raises(ValidationError, match="Mars/Olympus"):
        ProgressSettings(timezones={"acme": "Mars/Olympus"})
    with pytest.raises(ValidationError, match="not a time zone"):
        ProgressSettings(default_timezone="Nowhere")


def test_the_section_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("VIGIL_PROGRESS__SLA", '{"acme": {"urgent": {"first_response_s": 30}}}')
    monkeypatch.setenv("VIGIL_PROGRESS__TIMEZONES", '{"acme": "Australia/Sydney"}')
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.progress.targets("acme", "urgent").first_response_s == 30
    assert settings.progress.zone("acme").key == "Australia/Sydney"
