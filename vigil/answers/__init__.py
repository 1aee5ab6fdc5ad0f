"""Answers: a customer's question answered from the knowledge, drafted by the LLM when one is configured."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from vigil.answers.settings import AnswerSettings
from vigil.flow.capability import Capability, Platform
from vigil.llm.settings import LlmSettings

if TYPE_CHECKING:
    from vigil.answers.needs import ImplicitRequestDetector
    from vigil.cases.store import CaseStore
    from vigil.knowledge.store import KnowledgeStore

log = logging.getLogger(__name__)


def setup(
    settings: AnswerSettings,
    llm: LlmSettings,
    platform: Platform,
    *,
    store: CaseStore,
    knowledge: KnowledgeStore,
) -> Capability:
    """When enabled, the answer skill, gated by the intervention policy, and the analysts' verdicts on its answers
    kept for the knowledge to learn from; the LLM metrics in any case."""
    from vigil.answers.drafting import Drafter
    from vigil.answers.intervention import InterventionPolicy
    from vigil.answers.skill import AnswerSkill
    from vigil.answers.verdicts import VerdictKeeper
    from vigil.llm.metrics import LlmMetrics

    metrics = LlmMetrics(platform.registry)
    if not settings.enabled:
        return Capability(name="answers")
    drafter = Drafter(llm, metrics=metrics, clock=platform.clock)
    policy = InterventionPolicy(
        store=store, clock=platform.clock, settings=settings, implicit=_implicit(settings, knowledge)
    )
    # The skill reads what the conversation was told through the gate, which read it for the event already.
    return Capability(
        name="answers",
        skills=[AnswerSkill(knowledge, settings, drafter=drafter, conversation=policy.earlier)],
        gates={"answer": [policy]},
        keepers=[VerdictKeeper()],
        closing=[drafter.aclose],
    )


def _implicit(settings: AnswerSettings, knowledge: KnowledgeStore) -> ImplicitRequestDetector | None:
    """The implicit-request model, when it is on and reads the vectors the knowledge store makes."""
    from vigil.answers.needs import ImplicitRequestDetector, ImplicitRequests

    if not settings.implicit_requests:
        return None
    model = ImplicitRequests.load()
    if model.embedder != knowledge.embedder_name:
        log.warning(
            "implicit requests are off: the bundled model reads %s vectors, the knowledge store embeds with %s",
            model.embedder,
            knowledge.embedder_name,
        )
        return None
    return ImplicitRequestDetector(model, knowledge.embed, serving=lambda: knowledge.embedder_name)
