"""Bringing a database's schema to the newest migration, loading Alembic only when there is something to do.

Loading Alembic and its migration scripts costs a one-off command (``vigil kb stats``) more CPU than the rest of
its work, so ``upgrade`` first compares the revision the database records with the head of
``migrations/versions``, read from the scripts' text. Anything it cannot tell that way (a merge, a script it cannot
read, a database without the version table) is left to Alembic.
"""

from __future__ import annotations

import re
from importlib import resources
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING

import sqlalchemy as sa

if TYPE_CHECKING:
    from alembic.config import Config

_VERSION_TABLE = "alembic_version"  # Alembic's default, which env.py keeps
_REVISION = re.compile(r"""^revision(?:\s*:\s*str)?\s*=\s*["']([^"']+)["']""", re.M)
_DOWN = re.compile(r"""^down_revision(?:\s*:[^=]+)?\s*=\s*(?:["']([^"']+)["']|(None))\s*$""", re.M)


def _migrations() -> Traversable:
    return resources.files("vigil.db") / "migrations"


def head_revision() -> str | None:
    """The one revision no migration script builds on, from the scripts' text; None if that cannot be told so."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in (_migrations() / "versions").iterdir():
        if not script.name.endswith(".py") or script.name.startswith("_"):
            continue
        text = script.read_text(encoding="utf-8")
        revision, down = _REVISION.search(text), _DOWN.search(text)
        if revision is None or down is None:
            return None  # not the shape of the scripts here (a merge has a tuple): Alembic knows
        revisions.add(revision.group(1))
        if down.group(1) is not None:
            parents.add(down.group(1))
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def stored_revisions(connection: sa.Connection) -> set[str] | None:
    """The revisions the database records, or None if it has no version table (a new database)."""
    if not sa.inspect(connection).has_table(_VERSION_TABLE):
        return None
    rows = connection.execute(sa.text(f"SELECT version_num FROM {_VERSION_TABLE}"))
    return {row[0] for row in rows}


def upgrade(connection: sa.Connection) -> None:
    """Bring the schema on ``connection`` to the head revision; nothing is loaded if it is there already."""
    head = head_revision()
    if head is not None and stored_revisions(connection) == {head}:
        return
    from alembic import command  # noqa: PLC0415  (only when there is something to migrate)

    command.upgrade(alembic_config(connection), "head")


def alembic_config(connection: sa.Connection | None = None, *, metadata: sa.MetaData | None = None) -> Config:
    """Alembic's configuration for vigil's migrations (``vigil/db/migrations``), run on ``connection``.

    ``metadata`` is what the migrations are compared with (every package's tables: ``vigil.app.tables``); upgrading
    and downgrading run the scripts and need none.
    """
    from alembic.config import Config  # noqa: PLC0415  (loaded only to migrate or compare)

    config = Config()
    config.set_main_option("script_location", str(_migrations()))
    config.attributes["connection"] = connection
    config.attributes["metadata"] = metadata
    return config
