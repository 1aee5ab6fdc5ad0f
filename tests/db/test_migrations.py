"""Migrations build exactly the tables the code declares, on both databases, and can be undone."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.util import CommandError

from vigil.app.tables import metadata
from vigil.cases.store import CaseStore
from vigil.cases.views import CaseViews
from vigil.db.migrate import alembic_config


def _diff(connection: sa.Connection) -> list[object]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, metadata))


async def test_the_migrated_schema_matches_the_models(store: CaseStore):
    async with store.engine.connect() as conn:
        diff = await conn.run_sync(_diff)
    assert diff == [], "tables.py and the migrations disagree: add a migration"


def _downgrade(connection: sa.Connection) -> None:
    command.downgrade(alembic_config(connection), "base")


async def test_downgrade_to_base_then_upgrade_again(store: CaseStore):
    async with store.engine.begin() as conn:
        await conn.run_sync(_downgrade)
        tables = await conn.run_sync(lambda c: sa.inspect(c).get_table_names())
    assert set(tables) <= {"alembic_version"}
    await store.migrate()
    async with store.engine.connect() as conn:
        tables = await conn.run_sync(lambda c: sa.inspect(c).get_table_names())
    assert {"conversation", "message", "case_event", "suggestion", "feedback"} <= set(tables)


# --- 0005: idempotency by (conversation, id), keeping what 0004 stored ---


def _to(revision: str) -> Callable[[sa.Connection], None]:
    def run(connection: sa.Connection) -> None:
        config = alembic_config(connection)
        if revision == "head":
            command.upgrade(config, revision)
        else:
            command.downgrade(config, revision)

    return run


AT = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


async def test_0005_keeps_stored_events_and_keys_them_by_conversation(store: CaseStore, views: CaseViews):
    async with store.engine.begin() as conn:
        await conn.run_sync(_to("0004"))
    async with store.engine.begin() as conn:
        for conversation in ("c-1", "c-2"):
            await conn.execute(
                sa.text(
                    "INSERT INTO conversation (id, tenant, status, opened_at, updated_at, message_count)"
                    " VALUES (:id, 'acme', 'open', :at, :at, 1)"
                ),
                {"id": conversation, "at": AT},
            )
        insert_message = sa.text(
            "INSERT INTO message (message_id, conversation_id, sent_at, received_at, role, text)"
            " VALUES (:id, :conversation, :at, :at, 'customer', 'hello')"
        )
        await conn.execute(insert_message, [{"id": "m-1", "conversation": "c-1", "at": AT}])
        await conn.execute(insert_message, [{"id": "m-2", "conversation": "c-2", "at": AT}])
        await conn.execute(
            sa.text(
                "INSERT INTO case_event (event_id, conversation_id, at, received_at, event)"
                " VALUES ('e-1', 'c-1', :at, :at, 'escalated')"
            ),
            {"at": AT},
        )
        await conn.execute(
            sa.text(
                "INSERT INTO feedback (feedback_id, suggestion_id, conversation_id, verdict, at, received_at)"
                " VALUES ('f-1', 's-1', 'c-1', 'accepted', :at, :at)"
            ),
            {"at": AT},
        )
        with pytest.raises(sa.exc.IntegrityError):  # before 0005 an id was unique on its own
            async with conn.begin_nested():
                await conn.execute(insert_message, [{"id": "m-1", "conversation": "c-2", "at": AT}])

    await store.migrate()

    assert await views.count_events() == {"conversations": 2, "messages": 2, "case_events": 1}
    view = await views.conversation("c-1")
    assert view is not None
    assert [m.message_id for m in view.messages] == ["m-1"]
    async with store.engine.connect() as conn:  # a page shows verdicts on its suggestions only: read the table
        kept = (await conn.execute(sa.text("SELECT feedback_id, conversation_id FROM feedback"))).all()
    assert [tuple(row) for row in kept] == [("f-1", "c-1")]
    async with store.engine.begin() as conn:
        await conn.execute(insert_message, [{"id": "m-1", "conversation": "c-2", "at": AT}])  # now another's id
        for statement, row in (
            (insert_message, {"id": "m-1", "conversation": "c-1", "at": AT}),
            (
                sa.text(
                    "INSERT INTO case_event (event_id, conversation_id, at, received_at, event)"
                    " VALUES ('e-1', 'c-1', :at, :at, 'escalated')"
                ),
                {"at": AT},
            ),
            (
                sa.text(
                    "INSERT INTO feedback (feedback_id, suggestion_id, conversation_id, verdict, at, received_at)"
                    " VALUES ('f-1', 's-2', 'c-1', 'rejected', :at, :at)"
                ),
                {"at": AT},
            ),
        ):
            with pytest.raises(sa.exc.IntegrityError):  # but still one per conversation
                async with conn.begin_nested():
                    await conn.execute(statement, row)
    view = await views.conversation("c-2")
    assert view is not None and [m.message_id for m in view.messages] == ["m-1", "m-2"]  # newest first


# --- Alembic's own check, through vigil's environment: it compares with the tables the caller passes ---


def _check(metadata: sa.MetaData | None) -> Callable[[sa.Connection], None]:
    def run(connection: sa.Connection) -> None:
        command.check(alembic_config(connection, metadata=metadata))

    return run


async def test_alembic_finds_no_new_upgrade_operations_against_every_packages_tables(store: CaseStore):
    async with store.engine.connect() as conn:
        await conn.run_sync(_check(metadata))


async def test_alembic_cannot_compare_when_no_tables_are_passed(store: CaseStore):
    async with store.engine.connect() as conn:
        with pytest.raises(CommandError, match="does not provide a MetaData object"):
            await conn.run_sync(_check(None))
