"""Mining: closed, human-resolved cases distilled into knowledge (case entries and FAQs), redacted, merged, reviewed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vigil.flow.capability import Capability, Platform
from vigil.llm.settings import LlmSettings
from vigil.mining.settings import MinerSettings

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from vigil.knowledge.store import KnowledgeStore


def setup(
    settings: MinerSettings,
    llm: LlmSettings,
    platform: Platform,
    *,
    engine: AsyncEngine,
    knowledge: KnowledgeStore,
    load: bool,
) -> Capability:
    """When enabled, the miner as a durable scheduled job (one replica at a time), its entries written by the LLM
    where an API key is set (``llm``). It writes to the knowledge store, which the daemon opens only with ``load``
    (answers are on); without it, nothing is mined (``vigil mine --once`` still can)."""
    if not settings.enabled or not load:
        return Capability(name="mining")
    from vigil.mining.jobs import mining_job
    from vigil.mining.miner import Miner
    from vigil.mining.rewrite import rewriter_from

    rewriter = rewriter_from(llm, settings, registry=platform.registry, clock=platform.clock)
    miner = Miner(settings, engine=engine, knowledge=knowledge, clock=platform.clock, rewriter=rewriter)
    return Capability(
        name="mining",
        jobs=[mining_job(miner, settings.interval_s)],
        closing=[rewriter.aclose] if rewriter is not None else [],
    )
