"""The miner on the scheduler: every ``interval_s``, durable, so one replica mines each window (the scheduler's
claim) and a window missed while every replica was down runs at the next start. A run also holds the miner's own
lease, which keeps it from overlapping ``vigil mine --once`` (vigil/mining/miner.py)."""

from __future__ import annotations

import logging
from datetime import datetime

from vigil.flow.scheduler import Job
from vigil.mining.miner import Miner

log = logging.getLogger(__name__)

MINE = "miner"


def mining_job(miner: Miner, interval_s: float) -> Job:
    """Mine what is due at each window's due time. Coalesced: a run mines everything due, so of several windows
    due at once (a replay jumping ahead) only the latest is worth running."""

    async def mine(due: datetime) -> None:
        report = await miner.run(due)
        if report.busy is not None or report.mined or report.repeats or report.withdrawn or report.skipped:
            log.info("miner, window %s: %s", due.isoformat(), report.summary())
        else:
            log.info("miner, window %s: nothing new to mine", due.isoformat())

    return Job(name=MINE, run=mine, every_s=interval_s, durable=True, coalesce=True, lease_s=max(600.0, interval_s))
