"""Migrations build exactly the tables the code declares, on both databases, and can be undone."""

from __future__ import annotations

from importlib import resources

import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext

from vigil.store import CaseStore
from vigil.tables import metadata


def _diff(connection: sa.Connection) -> list[object]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, metadata))


async def test_the_migrated_schema_matches_the_models(store: CaseStore):
    async with store.engine.connect() as conn:
        diff = await conn.run_sync(_diff)
    assert diff == [], "tables.py and the migrations disagree: add a migration"


def _downgrade(connection: sa.Connection) -> None:
    config = Config()
    config.set_main_option("script_location", str(resources.files("vigil") / "migrations"))
    config.attributes["connection"] = connection
    command.downgrade(config, "base")


async def test_downgrade_to_base_then_upgrade_again(store: CaseStore):
    async with store.engine.begin() as conn:
        await conn.run_sync(_downgrade)
        tables = await conn.run_sync(lambda c: sa.inspect(c).get_table_names())
    assert set(tables) <= {"alembic_version"}
    await store.migrate()
    async with store.engine.connect() as conn:
        tables = await conn.run_sync(lambda c: sa.inspect(c).get_table_names())
    assert {"conversation", "message", "case_event", "suggestion", "feedback"} <= set(tables)
