"""The knowledge capability's scheduled jobs."""

from __future__ import annotations

import logging
from datetime import datetime

from vigil.flow.scheduler import Job
from vigil.knowledge.store import KnowledgeStore

log = logging.getLogger(__name__)

REFRESH = "knowledge-refresh"


def refresh_job(store: KnowledgeStore, interval_s: float) -> Job:
    """Every ``interval_s``, pick up what another process (``vigil kb import``, the miner) changed in the knowledge,
    and the analysts' verdicts on answers received since (``vigil.knowledge.verdicts``).

    Not durable: every replica rebuilds its own in-memory indexes. Coalesced: only the latest of several windows due
    at once is worth running.
    """

    async def refresh(due: datetime) -> None:
        if await store.refresh_if_changed():
            log.info("knowledge or analysts' verdicts changed; indexes rebuilt")

    return Job(name=REFRESH, run=refresh, every_s=interval_s, coalesce=True)
