"""Alembic environment: vigil runs migrations on a connection it passes in (``vigil db upgrade``)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

# Any constant: replicas starting together queue on this lock instead of migrating at the same time.
_MIGRATION_LOCK = 0x76696769


def _metadata() -> sa.MetaData | None:
    """The tables to compare with, as the caller passed them (``vigil.db.migrate.alembic_config``): the platform does
    not import the packages that declare them. An upgrade or a downgrade runs the scripts alone."""
    metadata = context.config.attributes.get("metadata")
    return metadata if isinstance(metadata, sa.MetaData) else None


def _run(connection: sa.Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=_metadata(),
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
        context.run_migrations()


def _run_offline() -> None:
    context.configure(
        url=context.config.get_main_option("sqlalchemy.url"),
        target_metadata=_metadata(),
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    _run_offline()
else:
    _connection = context.config.attributes.get("connection")
    if _connection is None:
        raise RuntimeError("vigil's migrations run through `vigil db upgrade` (or at start-up), not bare alembic")
    _run(_connection)
