"""The knowledge capability's scheduled jobs."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from vigil.core.errors import StartupError
from vigil.flow.scheduler import Job
from vigil.knowledge.embedding import Embedder
from vigil.knowledge.store import KnowledgeStore
from vigil.knowledge.tuned import Manifest
from vigil.knowledge.tuner import Busy

log = logging.getLogger(__name__)

REFRESH = "knowledge-refresh"
TUNE = "knowledge-tune"


def refresh_job(store: KnowledgeStore, interval_s: float, follow: Callable[[], Embedder] | None = None) -> Job:
    """Every ``interval_s``, pick up what another process (``vigil kb import``, the miner) changed in the knowledge,
    the analysts' verdicts on answers received since (``vigil.knowledge.verdicts``), and the model it should serve
    (``follow``: the settings' choice, a tuned model once one is accepted).

    Not durable: every replica rebuilds its own in-memory indexes. Coalesced: only the latest of several windows due
    at once is worth running.
    """
    refused: set[str] = set()  # models that would not load: logged once, not retried every few seconds

    async def refresh(due: datetime) -> None:
        if follow is not None:
            wanted = follow()
            if wanted.name != store.embedder_name and wanted.name not in refused:
                try:
                    await store.use_model(wanted)
                except StartupError:
                    refused.add(wanted.name)
                    log.exception("cannot serve the model %s; keeping %s", wanted.name, store.embedder_name)
        if await store.refresh_if_changed():
            log.info("knowledge or analysts' verdicts changed; indexes rebuilt")

    return Job(name=REFRESH, run=refresh, every_s=interval_s, coalesce=True)


def tune_job(tune: Callable[[], Awaitable[Manifest]], interval_s: float) -> Job:
    """Every ``interval_s``, tune the model on the knowledge (``vigil.knowledge.tuner``). Durable: one replica runs
    each window; the run also holds the miner's lease. The refresh job of each process then serves the model if the
    gate accepted it."""

    async def run(due: datetime) -> None:
        try:
            manifest = await tune()
        except Busy as busy:
            log.info("no tuning this time: %s", busy)
            return
        log.info("tuning: %s (%s)", "accepted" if manifest.accepted else "rejected", manifest.reason)

    return Job(name=TUNE, run=run, every_s=interval_s, durable=True, coalesce=True, lease_s=600.0)
