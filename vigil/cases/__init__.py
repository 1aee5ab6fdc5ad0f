"""The case store: every event, each conversation's state, the suggestions made and the analysts' verdicts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vigil.db.settings import DatabaseSettings
from vigil.flow.capability import Capability, Platform, Step

if TYPE_CHECKING:
    from vigil.cases.store import CaseStore


def setup(settings: DatabaseSettings, platform: Platform, *, store: CaseStore) -> Capability:
    """The database as a readiness check, migrated at start-up when the settings say so, closed last."""
    starting = [Step("migrating the database", store.migrate)] if settings.migrate_on_start else []
    return Capability(name="cases", checks={"database": store.ping}, starting=starting, closing=[store.close])
