"""The knowledge store: help articles, FAQs and documents, searchable by meaning and by words."""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from vigil.flow.capability import Capability, Platform, Step
from vigil.knowledge.settings import KnowledgeSettings

if TYPE_CHECKING:
    from vigil.flow.scheduler import Job
    from vigil.knowledge.store import KnowledgeStore


log = logging.getLogger(__name__)

_PHASE = "loading the knowledge"


def setup(
    settings: KnowledgeSettings,
    platform: Platform,
    *,
    knowledge: KnowledgeStore,
    load: bool,
    data_dir: Path | None = None,
) -> Capability:
    """With ``load`` (answers are on): open the store and import ``settings.paths`` at start-up, then pick up
    changes every ``refresh_interval_s`` (a scheduled job). Without it, the store is only read by the panel.

    With ``data_dir`` (the store serves the model the settings choose, not one handed in): the refresh also switches
    to the tuned model the data dir names once one is accepted, and with ``tune_interval_s`` a durable job tunes one
    on the knowledge and the analysts' verdicts (``vigil.knowledge.tuner``)."""
    from vigil.knowledge.embedding import embedder_for
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

    follow = None if data_dir is None else partial(embedder_for, settings, data_dir)
    return Capability(
        name="knowledge",
        starting=[Step(_PHASE, knowledge.open), Step(_PHASE, import_files)],
        checks={"knowledge": knowledge.check},
        jobs=[
            refresh_job(knowledge, settings.refresh_interval_s, follow),
            *_tuning(settings, platform, knowledge, data_dir),
        ],
        closing=[knowledge.close],
    )


def _tuning(
    settings: KnowledgeSettings,
    platform: Platform,
    knowledge: KnowledgeStore,
    data_dir: Path | None,
) -> list[Job]:
    """The scheduled tuning job, when it has an interval and a data dir to write its models to."""
    from vigil.knowledge.jobs import tune_job
    from vigil.knowledge.tuner import tune_with_lease

    if settings.tune_interval_s is None or data_dir is None:
        return []
    run = partial(
        tune_with_lease,
        knowledge.served,
        settings,
        data_dir=data_dir,
        engine=knowledge.engine,
        clock=platform.clock,
    )
    return [tune_job(run, settings.tune_interval_s)]
