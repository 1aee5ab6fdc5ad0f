"""Readiness checks: what they log. "Reachable again" only ends an outage that was reported."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry

from vigil.app.health import Health
from vigil.core.clock import ManualClock
from vigil.core.errors import StoreUnavailable
from vigil.core.metrics import Metrics


class Switch:
    """A dependency that answers or not, as the test says."""

    def __init__(self) -> None:
        self.up = False

    async def check(self) -> None:
        if not self.up:
            raise StoreUnavailable("connection refused")


def health(switch: Switch) -> Health:
    clock = ManualClock(datetime(2026, 11, 2, 9, 0, tzinfo=UTC))
    return Health({"database": switch.check}, clock=clock, metrics=Metrics(CollectorRegistry()), interval_s=1.0)


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "vigil.app.health"]


async def test_a_dependency_still_starting_is_not_reachable_again_when_it_answers(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO)
    switch = Switch()
    checks = health(switch)
    await checks.check_once()  # the database is still starting
    await checks.check_once()
    switch.up = True
    await checks.check_once()
    assert checks.ready
    assert said(caplog) == []


async def test_a_real_outage_is_reported_and_so_is_its_end(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO)
    switch = Switch()
    switch.up = True
    checks = health(switch)
    await checks.check_once()
    switch.up = False
    await checks.check_once()
    await checks.check_once()  # one warning per outage, not per check
    assert not checks.ready
    switch.up = True
    await checks.check_once()
    await checks.check_once()
    assert said(caplog) == ["database is not reachable: connection refused", "database is reachable again"]
