"""Every package's SQL tables on the one ``metadata``: what the migrations are compared with.

Each package declares its own tables; importing them here registers them all, in the composition root, so that the
platform (``vigil.db``) never imports a capability.
"""

from __future__ import annotations

import vigil.actions.tables
import vigil.cases.tables
import vigil.flow.tables
import vigil.knowledge.tables
import vigil.mining.tables
import vigil.panel.tables
import vigil.progress.tables
from vigil.db.schema import metadata

PACKAGES = (
    vigil.flow.tables, vigil.cases.tables, vigil.knowledge.tables, vigil.mining.tables, vigil.panel.tables,
    vigil.progress.tables, vigil.actions.tables,
)  # fmt: skip
"""The modules that declare tables."""

__all__ = ["PACKAGES", "metadata"]
