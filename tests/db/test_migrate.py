"""Migrating to the head revision: Alembic runs only when the database is not there already."""

from __future__ import annotations

from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

from vigil.cases.store import CaseStore
from vigil.db import migrate


def test_the_head_revision_read_from_the_scripts_text_is_alembics():
    assert migrate.head_revision() == ScriptDirectory.from_config(migrate.alembic_config()).get_current_head()


@pytest.fixture
def upgrades(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The revisions Alembic was asked to upgrade to."""
    asked: list[str] = []
    real = command.upgrade

    def recorded(config: Config, revision: str, **kwargs: Any) -> None:
        asked.append(revision)
        real(config, revision, **kwargs)

    monkeypatch.setattr(command, "upgrade", recorded)
    return asked


async def test_a_database_at_the_head_revision_is_left_to_itself(store: CaseStore, upgrades: list[str]):
    await store.migrate()
    assert upgrades == []


async def test_a_database_a_revision_behind_is_upgraded_to_the_head(store: CaseStore, upgrades: list[str]):
    async with store.engine.begin() as conn:
        await conn.run_sync(lambda c: command.downgrade(migrate.alembic_config(c), "-1"))
        assert await conn.run_sync(migrate.stored_revisions) != {migrate.head_revision()}
    await store.migrate()
    assert upgrades == ["head"]
    async with store.engine.connect() as conn:
        assert await conn.run_sync(migrate.stored_revisions) == {migrate.head_revision()}
