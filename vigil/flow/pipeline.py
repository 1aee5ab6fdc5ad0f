"""The pipeline: store the event, apply it to its case, let skills propose, gate, store and publish.

One call handles one event; the caller (``ingest``) guarantees that a conversation's events arrive one at a time,
in order. Each step is idempotent by the event's id, so a re-delivered event changes nothing, except that a
suggestion stored but not yet published before a crash is published now.

A skill whose knowledge store cannot be reached is asked again a few times with back-off, then stays silent for
this event (counted as ``knowledge_unavailable``, not as a skill failure): an outage never dead-letters an event
and holds its partition for a bounded time only.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from functools import partial
from typing import Protocol

from vigil.cases.store import CaseStore
from vigil.cases.writes import CaseState
from vigil.core.clock import Clock
from vigil.core.errors import KnowledgeUnavailable
from vigil.core.metrics import Metrics
from vigil.core.retry import Backoff
from vigil.flow.gates import Gate
from vigil.flow.skills import Proposal, Skill
from vigil.live import feed as live
from vigil.live.feed import LiveFeed
from vigil.transport.base import Sink
from vigil.wire.events import Event, Feedback, Suggestion

log = logging.getLogger(__name__)

_SUGGESTION_IDS = uuid.UUID("6f1d4a52-8c1e-4f0a-9d7b-3a5c2e9b7f10")


class Watcher(Protocol):
    """Told what the pipeline has just done (the live feed watches this way); it must not block or raise."""

    def recorded(self, event: Event, case: CaseState) -> None:
        """``event`` is committed and applied to ``case``."""
        ...

    def suggested(self, suggestion: Suggestion) -> None:
        """``suggestion`` is published."""
        ...


class Pipeline:
    """Everything that happens to one decoded event."""

    def __init__(
        self,
        *,
        store: CaseStore,
        skills: Sequence[Skill],
        gate: Gate,
        sinks: Sequence[Sink],
        clock: Clock,
        metrics: Metrics,
        backoff: Backoff,
        default_tenant: str,
        feed: LiveFeed | None = None,
        unavailable_attempts: int = 3,
    ) -> None:
        """``unavailable_attempts``: how many times a skill is asked while its knowledge store is unreachable before
        it is left silent for the event (with the back-off's delays between them)."""
        self._store = store
        self._feed = feed
        self._default_tenant = default_tenant
        self._skills = tuple(skills)
        self._gate = gate
        self._sinks = tuple(sinks)
        self._clock = clock
        self._metrics = metrics
        self._backoff = backoff
        self._unavailable_attempts = unavailable_attempts

    async def handle(self, event: Event, received: float, superseded: Callable[[], bool] = lambda: False) -> None:
        """Handle one event; ``received`` is the clock's monotonic time when its record arrived, and
        ``superseded`` tells whether a newer message of the same conversation has arrived since.

        Raises:
            EventConflict: the event contradicts the stored case (the caller dead-letters it).
            StoreError: the database refused the event (the caller dead-letters it).
        """
        recorded = await self._backoff.retry("storing an event", lambda: self._store.record(event))
        if not recorded.new:
            self._metrics.events_duplicate.labels(event.type).inc()
            leftover = await self._backoff.retry(
                "reading unpublished suggestions",
                lambda: self._store.unpublished_replies(event.conversation_id, event.id),
            )
            await self._publish(self._timely(leftover, event, superseded), received)
            return
        self._observe(event, recorded.case, recorded.suggestion_kind)
        suggestions = [s for skill in self._skills for s in await self._consult(skill, event, recorded.case, received)]
        suggestions = self._timely(suggestions, event, superseded)
        for suggestion in suggestions:
            await self._backoff.retry("storing a suggestion", partial(self._store.save_suggestion, suggestion))
        await self._publish(suggestions, received)

    def _observe(self, event: Event, case: CaseState | None, suggestion_kind: str | None) -> None:
        if isinstance(event, Feedback):
            self._metrics.feedback.labels(suggestion_kind or "unknown", event.verdict).inc()
        if self._feed is not None and self._feed.listening and case is not None:
            self._feed.publish(live.recorded(event, case))

    async def _consult(self, skill: Skill, event: Event, case: CaseState | None, received: float) -> list[Suggestion]:
        admitted = await self._backoff.retry("consulting the gate", lambda: self._gate.admit(skill.kind, event, case))
        if not admitted.speak:
            self._metrics.suggestions_suppressed.labels(admitted.reason).inc()
            return []
        try:
            proposals = await self._backoff.retry(
                f"asking the {skill.name} skill",
                partial(skill.propose, event, case),
                attempts=self._unavailable_attempts,
            )
        except KnowledgeUnavailable as exc:
            log.warning(
                "skill %s is silent on %s %s: %s",
                skill.name,
                event.type,
                event.id,
                exc,
                extra={"conversation_id": event.conversation_id},
            )
            self._metrics.suggestions_suppressed.labels(exc.reason).inc()
            return []
        except Exception:
            log.exception(
                "skill %s failed on %s %s",
                skill.name,
                event.type,
                event.id,
                extra={"conversation_id": event.conversation_id},
            )
            self._metrics.skill_failures.labels(skill.name).inc()
            return []
        said = []
        for index, proposal in enumerate(proposals):
            decision = await self._backoff.retry(
                "consulting the gate", partial(self._gate.review, proposal, event, case)
            )
            if not decision.speak:
                self._metrics.suggestions_suppressed.labels(decision.reason).inc()
                continue
            said.append(self._suggestion(proposal, event, case, f"{skill.name}/{index}", received))
        return said

    def _suggestion(
        self,
        proposal: Proposal,
        event: Event,
        case: CaseState | None,
        slot: str,
        received: float,
    ) -> Suggestion:
        return Suggestion(
            # Event ids are unique only within their conversation.
            suggestion_id=str(uuid.uuid5(_SUGGESTION_IDS, f"{event.conversation_id}/{event.id}/{slot}")),
            conversation_id=event.conversation_id,
            tenant=case.tenant if case else (event.tenant or self._default_tenant),
            in_reply_to=event.id,
            created_at=self._clock.now(),
            kind=proposal.kind,
            text=proposal.text,
            why=proposal.why or None,
            confidence=proposal.confidence,
            sources=list(proposal.sources),
            action=proposal.action,
            latency_ms=round((self._clock.monotonic() - received) * 1000, 3),
        )

    def _timely(self, suggestions: list[Suggestion], event: Event, superseded: Callable[[], bool]) -> list[Suggestion]:
        if not suggestions:
            return suggestions
        decision = self._gate.timely(event, superseded=superseded())
        if decision.speak:
            return suggestions
        self._metrics.suggestions_suppressed.labels(decision.reason).inc(len(suggestions))
        return []

    async def _publish(self, suggestions: list[Suggestion], received: float) -> None:
        if not suggestions:
            return
        for suggestion in suggestions:
            for sink in self._sinks:
                await self._backoff.retry(f"publishing to {sink.name}", partial(sink.publish, suggestion))
            self._metrics.suggestions_published.labels(suggestion.kind).inc()
            self._metrics.suggestion_latency.observe(self._clock.monotonic() - received)
            if self._feed is not None and self._feed.listening:
                self._feed.publish(live.suggested(suggestion))
        await self._backoff.retry(
            "marking suggestions published", lambda: self._store.mark_published([s.suggestion_id for s in suggestions])
        )
