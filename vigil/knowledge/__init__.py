"""The knowledge store: help articles, FAQs and documents, searchable by meaning and by words."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from vigil.flow.capability import Capability, Platform, Step
from vigil.knowledge.settings import KnowledgeSettings

if TYPE_CHECKING:
    from vigil.knowledge.store import KnowledgeStore


log = logging.getLogger(__name__)

_PHASE = "loading the knowledge"


def setup(settings: KnowledgeSettings, platform: Platform, *, knowledge: KnowledgeStore, load: bool) -> Capability:
    """With ``load`` (answers are on): open the store and import ``settings.paths`` at start-up, then pick up
    changes every ``refresh_interval_s`` (a scheduled job). Without it, the store is only read by the panel."""
    from vigil.knowledge.jobs import refresh_job

    if not load:
        return Capability(name="knowledge", closing=[knowledge.close])

    async def import_files() -> None:
        if not settings.paths:
            return
        report = await knowledge.import_files(settings.paths)
        log.info(
            "knowledge from %s: %d added, %d updated, %d unchanged",
            ", ".join(map(str, settings.paths)),
            report.added,
            report.updated,
            report.unchanged,
        )

    return Capability(
        name="knowledge",
        starting=[Step(_PHASE, knowledge.open), Step(_PHASE, import_files)],
        checks={"knowledge": knowledge.check},
        jobs=[refresh_job(knowledge, settings.refresh_interval_s)],
        closing=[knowledge.close],
    )
