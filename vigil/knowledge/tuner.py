"""One tuning run: the served knowledge (and the analysts' verdicts) in, a judged model and its manifest out.

The run holds the miner's lease (``LEASE``), whoever starts it (the scheduled job on any replica, ``vigil kb
tune``): the miner changes the knowledge a run trains on, and mined cases' vectors are labelled with the model that
made them, so the two never overlap. It reads the entries from SQL and never touches Chroma: the processes serving
searches switch to an accepted model themselves (``KnowledgeStore.use_model``), each in its own time.

The shipped model is always the base (a tuned model is never tuned again, which would drift from the words its
training never covered) and always the yardstick of the gate.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from vigil.core.clock import Clock
from vigil.db.settings import DatabaseSettings
from vigil.flow.leases import Holder, Lease
from vigil.flow.scheduler import replica_id
from vigil.knowledge import tuned, tuning
from vigil.knowledge.documents import Entry
from vigil.knowledge.embedding import SHIPPED, bundled_model_path
from vigil.knowledge.onnx_embedding import OnnxEmbedder
from vigil.knowledge.settings import KnowledgeSettings
from vigil.knowledge.store import standalone
from vigil.knowledge.tables import VERDICT
from vigil.knowledge.training import Recipe, fine_tune

log = logging.getLogger(__name__)

_RANKED = 10
"""How deep the judging search ranks (an entry below it counts 0 in the MRR)."""

LEASE = "miner"
"""The miner's lease (``vigil.mining.miner.LEASE``; knowledge sits below mining and cannot import it)."""
VERDICTS = 20_000
"""The most analysts' verdicts a run learns from: the newest."""


class Busy(Exception):
    """The lease is held: the miner or another tuning run is at work (control flow, not a failure)."""

    def __init__(self, holder: Holder) -> None:
        super().__init__(f"the miner's lease is held by {holder.owner} until {holder.until.isoformat()}")
        self.holder = holder


async def tune_with_lease(
    entries: Callable[[], Awaitable[Sequence[Entry]]],
    settings: KnowledgeSettings,
    *,
    data_dir: Path,
    engine: AsyncEngine,
    clock: Clock,
) -> tuned.Manifest:
    """``tune`` on ``entries`` and the analysts' verdicts the knowledge holds, while holding the miner's lease.

    Raises:
        Busy: another holds the lease; nothing was done.
    """
    lease = Lease(engine, LEASE, owner=replica_id(), clock=clock, duration_s=settings.tune_budget_s + 900.0)
    holder = await lease.take()
    if holder is not None:
        raise Busy(holder)
    try:
        found = await stored_verdicts(engine)
        return await tune(await entries(), settings, data_dir=data_dir, clock=clock, verdicts=found)
    finally:
        await lease.free()


async def stored_verdicts(engine: AsyncEngine, *, limit: int = VERDICTS) -> list[tuning.Verdict]:
    """The newest analysts' verdicts on answers (``vigil.knowledge.verdicts`` keeps them with their questions):
    accepted and edited answers say their entry answered the question, dismissed ones that it did not."""
    query = (
        sa.select(VERDICT.c.question, VERDICT.c.entry_id, VERDICT.c.verdict)
        .where(VERDICT.c.verdict.in_(["accepted", "edited", "dismissed"]))
        .order_by(VERDICT.c.received_at.desc())
        .limit(limit)
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return [tuning.Verdict(r.question, r.entry_id, accepted=r.verdict != "dismissed") for r in rows]


async def tune(
    entries: Sequence[Entry],
    settings: KnowledgeSettings,
    *,
    data_dir: Path,
    clock: Clock,
    verdicts: Sequence[tuning.Verdict] = (),
) -> tuned.Manifest:
    """Tune the shipped model on ``entries`` and ``verdicts``, judge it on the held-back questions against the
    shipped one, and record the run (``tuned.record``): the pointer moves only if the gate accepts the model."""
    started = time.monotonic()
    base = settings.model_path or bundled_model_path()
    plan = tuning.plan(entries, verdicts)
    corpus = tuning.Corpus.of([e for e in entries if e.passages])
    shipped = OnnxEmbedder(base, cache_dir=settings.onnx_cache, threads=settings.tune_threads or 1)
    await asyncio.to_thread(shipped.load)
    passages = await asyncio.to_thread(shipped.embed, corpus.texts)
    asked = await asyncio.to_thread(shipped.embed, [p.question for p in plan.train])
    held = [p.question for p in plan.held_back]
    alone = tuning.score(plan.held_back, await asyncio.to_thread(shipped.embed, held), corpus, passages)
    rows = tuning.examples(plan.train, asked, corpus, passages, tuning.siblings(entries))
    judged = tuning.without_held_back(entries, plan.held_back)
    before = await _as_served(settings, None, judged, plan.held_back)
    version = tuned.new_version(base.name if settings.model_path else SHIPPED, clock.now())
    folder = tuned.model_folder(data_dir, version)
    log.info("tuning %s on %d examples (%d held back)", version, len(rows), len(plan.held_back))
    try:
        trained = await fine_tune(base, rows, folder, tuned.onnx_dir(data_dir), _recipe(settings))
        candidate = OnnxEmbedder(folder, cache_dir=tuned.onnx_dir(data_dir), threads=settings.tune_threads or 1)
        await asyncio.to_thread(candidate.load)
        alone_after = tuning.score(
            plan.held_back,
            await asyncio.to_thread(candidate.embed, held),
            corpus,
            await asyncio.to_thread(candidate.embed, corpus.texts),
        )
        after = await _as_served(settings, folder, judged, plan.held_back, onnx_cache=tuned.onnx_dir(data_dir))
    except BaseException:
        tuned.discard(folder)
        raise
    decision = tuning.decide(before, after, margin=settings.tune_margin)
    manifest = tuned.Manifest(
        version=version,
        accepted=decision.accepted,
        reason=decision.reason,
        base=base.name if settings.model_path else SHIPPED,
        base_hash=await asyncio.to_thread(tuned.weights_hash, base),
        created_at=clock.now().isoformat(),
        seconds=round(time.monotonic() - started, 1),
        counts={**plan.counts, "examples": len(rows), "passages": len(corpus.ids)},
        training=asdict(trained),
        shipped=asdict(before),
        tuned=asdict(after),
        alone={"shipped": asdict(alone), "tuned": asdict(alone_after)},
    )
    await asyncio.to_thread(tuned.record, data_dir, manifest)
    log.info("tuned model %s %s: %s", version, "accepted" if decision.accepted else "rejected", decision.reason)
    return manifest


async def _as_served(
    settings: KnowledgeSettings,
    model: Path | None,
    entries: Sequence[Entry],
    probes: Sequence[tuning.Pair],
    *,
    onnx_cache: Path | None = None,
) -> tuning.Score:
    """How well the knowledge store's whole search, on ``model`` (None: the one tuned from), ranks each probe's
    entry: a throwaway store (SQLite and embedded Chroma in a temporary folder) holding ``entries``."""
    chosen = settings.model_copy(
        update={
            "model_path": model or settings.model_path,
            "onnx_cache": onnx_cache if model is not None else settings.onnx_cache,
            "tuned": False,
            "embedding_threads": settings.tune_threads or 1,
            "paths": [],
            "chroma_url": None,  # never a shared server: this store is thrown away
        }
    )
    with tempfile.TemporaryDirectory(prefix="vigil-tune-") as folder:
        async with standalone(chosen, DatabaseSettings(), data_dir=Path(folder)) as store:
            await store.upsert(entries)
            rankings = [[hit.entry_id for hit in await store.search(p.question, _RANKED)] for p in probes]
    return tuning.rank_score(probes, rankings)


def _recipe(settings: KnowledgeSettings) -> Recipe:
    return Recipe(
        epochs=settings.tune_epochs,
        batch_size=settings.tune_batch_size,
        budget_s=settings.tune_budget_s,
        threads=settings.tune_threads or 1,
    )
