"""The pipeline: store the event, apply it to its case, let skills propose, gate, store and publish.

One call handles one event; the caller (``ingest``) guarantees that a conversation's events arrive one at a time,
in order. Each step is idempotent by the event's id. An event is done when the skills have finished with it, not
when it is stored: once every skill has answered (or failed for a bug, which asking again would not change), the
store notes it ``finished`` with its next batch. A re-delivered event that was finished changes nothing, except that
a suggestion stored but not yet published before a crash is published now; one that was not (a crash, or a
dependency down, between its commit and the skills' end) is shown to the skills again, with the case as it stands.
Their writes are keyed by the event, and their suggestions' ids by the event and what is said, so a second run
stores nothing twice, and what was already published is not published again.

A skill that a dependency fails (``Unavailable``: its knowledge store, say) is asked again a few times with
back-off, then stays silent for this event (counted under the error's reason, ``knowledge_unavailable`` for
instance, not as a skill failure): an outage never dead-letters an event and holds its partition for a bounded time
only.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import partial
from typing import Protocol

from prometheus_client import Counter

from vigil.core.clock import Clock
from vigil.core.errors import Unavailable
from vigil.core.faults import fault
from vigil.core.metrics import Metrics
from vigil.core.retry import Backoff
from vigil.flow.case import CaseState, Recorded
from vigil.flow.gates import Gates
from vigil.flow.skills import Proposal, Skill, keyed, suggestion_id
from vigil.transport.base import Sink
from vigil.wire.events import Event, Feedback, Suggestion

log = logging.getLogger(__name__)


class Recorder(Protocol):
    """Where the pipeline writes: the case store, idempotent by the event's conversation and id."""

    async def record(self, event: Event) -> Recorded:
        """Store ``event`` and apply it to its case (nothing new if already stored)."""
        ...

    async def save_suggestion(self, suggestion: Suggestion) -> Suggestion | None:
        """Store a suggestion about to be published; return what to publish under its id (the copy stored first,
        so an id never goes out with two contents), or None when that is already out."""
        ...

    async def mark_published(self, suggestion_ids: list[str]) -> None:
        """Note that these suggestions are out."""
        ...

    async def unpublished_replies(self, conversation_id: str, event_id: str) -> list[Suggestion]:
        """The suggestions replying to this event that were stored but not published."""
        ...

    def finished(self, event: Event) -> None:
        """Note (soon, without waiting) that the skills have finished with ``event``."""
        ...


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
        recorder: Recorder,
        skills: Sequence[Skill],
        gates: Gates,
        sinks: Sequence[Sink],
        clock: Clock,
        metrics: Metrics,
        backoff: Backoff,
        default_tenant: str,
        watchers: Sequence[Watcher] = (),
        unavailable_attempts: int = 3,
    ) -> None:
        """``unavailable_attempts``: how many times a skill is asked while a dependency it needs is unreachable
        before it is left silent for the event (with the back-off's delays between them)."""
        self._store = recorder
        self._watchers = tuple(watchers)
        self._default_tenant = default_tenant
        self._skills = tuple(skills)
        self._gates = gates
        self._sinks = tuple(sinks)
        self._clock = clock
        self._metrics = metrics
        self._backoff = backoff
        self._unavailable_attempts = unavailable_attempts
        self._suppressed: dict[str, Counter] = {}  # the counter of each reason, looked up once

    async def handle(self, event: Event, received: float, superseded: Callable[[], bool] = lambda: False) -> None:
        """Handle one event; ``received`` is the clock's monotonic time when its record arrived, and
        ``superseded`` tells whether a newer message of the same conversation has arrived since.

        Raises:
            EventConflict: the event contradicts the stored case (the caller dead-letters it).
            StoreError: the database refused the event (the caller dead-letters it).
        """
        recorded = await self._backoff.retry("storing an event", lambda: self._store.record(event))
        fault("event.after_record")
        if not recorded.new:
            self._metrics.events_duplicate.labels(event.type).inc()
        if not recorded.new and recorded.finished:
            leftover = await self._unpublished(event)
            await self._publish(self._timely(leftover, event, superseded), received)
            return
        if recorded.new:
            self._observe(event, recorded.case, recorded.suggestion_kind)
        suggestions: list[Suggestion] = []
        done = True
        for skill in self._skills:
            said, answered = await self._consult(skill, event, recorded.case, received)
            suggestions += said
            done = done and answered
        suggestions = await self._stored(self._timely(suggestions, event, superseded))
        if not recorded.new:
            # Shown to the skills again: what they said then and was published stays said; what was stored and
            # not published (then or now) goes out.
            suggestions = self._timely(await self._unpublished(event), event, superseded)
        await self._publish(suggestions, received)
        if done:
            self._store.finished(event)
            fault("event.after_finish")

    async def _stored(self, suggestions: list[Suggestion]) -> list[Suggestion]:
        """Store ``suggestions``; what is to be published of them (under an id made before: the copy stored then,
        unless it is already out)."""
        out = []
        for suggestion in suggestions:
            stored = await self._backoff.retry("storing a suggestion", partial(self._store.save_suggestion, suggestion))
            if stored is not None:
                out.append(stored)
        return out

    async def _unpublished(self, event: Event) -> list[Suggestion]:
        return await self._backoff.retry(
            "reading unpublished suggestions",
            lambda: self._store.unpublished_replies(event.conversation_id, event.id),
        )

    def _observe(self, event: Event, case: CaseState | None, suggestion_kind: str | None) -> None:
        if isinstance(event, Feedback):
            self._metrics.feedback.labels(suggestion_kind or "unknown", event.verdict).inc()
        if case is not None:
            for watcher in self._watchers:
                watcher.recorded(event, case)

    async def _consult(
        self, skill: Skill, event: Event, case: CaseState | None, received: float
    ) -> tuple[list[Suggestion], bool]:
        """What ``skill`` says of ``event`` that its gates let through, and whether it has finished with the event
        (False while a dependency it needs is unavailable: a redelivery asks it again)."""
        gate = self._gates[skill.kind]
        admitted = await self._backoff.retry("consulting the gate", lambda: gate.admit(skill.kind, event, case))
        if not admitted.speak:
            self._silenced(admitted.reason)
            return [], True
        try:
            proposals = await self._backoff.retry(
                f"asking the {skill.name} skill",
                partial(skill.propose, event, case),
                attempts=self._unavailable_attempts,
            )
        except Unavailable as exc:
            log.warning(
                "skill %s is silent on %s %s: %s",
                skill.name,
                event.type,
                event.id,
                exc,
                extra={"conversation_id": event.conversation_id},
            )
            self._silenced(exc.reason)
            return [], False
        except Exception:
            log.exception(
                "skill %s failed on %s %s",
                skill.name,
                event.type,
                event.id,
                extra={"conversation_id": event.conversation_id},
            )
            self._metrics.skill_failures.labels(skill.name).inc()
            return [], True
        fault(f"skill.after:{skill.name}")
        said = []
        for index, proposal in enumerate(proposals):
            decision = await self._backoff.retry(
                "consulting the gate", partial(self._gates[proposal.kind].review, proposal, event, case)
            )
            if not decision.speak:
                self._silenced(decision.reason)
                continue
            said.append(self._suggestion(proposal, event, case, f"{skill.name}/{index}", received))
        return said, True

    def _silenced(self, reason: str, count: int = 1) -> None:
        """Count ``count`` suggestions kept quiet for ``reason`` (most events are: every one no skill answers)."""
        counter = self._suppressed.get(reason)
        if counter is None:
            counter = self._suppressed[reason] = self._metrics.suggestions_suppressed.labels(reason)
        counter.inc(count)

    def _suggestion(
        self,
        proposal: Proposal,
        event: Event,
        case: CaseState | None,
        slot: str,
        received: float,
    ) -> Suggestion:
        return self._made(
            proposal,
            # Event ids are unique only within their conversation.
            key=keyed(event.conversation_id, proposal.key)
            if proposal.key
            else f"{event.conversation_id}/{event.id}/{slot}",
            conversation_id=event.conversation_id,
            tenant=case.tenant if case else (event.tenant or self._default_tenant),
            in_reply_to=event.id,
            latency_ms=round((self._clock.monotonic() - received) * 1000, 3),
        )

    def _made(
        self,
        proposal: Proposal,
        *,
        key: str,
        conversation_id: str,
        tenant: str,
        in_reply_to: str | None,
        latency_ms: float,
    ) -> Suggestion:
        """The suggestion ``proposal`` makes, its id named by ``key`` (the same key, the same id)."""
        return Suggestion(
            suggestion_id=suggestion_id(key),
            conversation_id=conversation_id,
            tenant=tenant,
            in_reply_to=in_reply_to,
            created_at=self._clock.now(),
            kind=proposal.kind,
            text=proposal.text,
            why=proposal.why or None,
            confidence=proposal.confidence,
            sources=list(proposal.sources),
            action=proposal.action,
            step=proposal.step,
            latency_ms=latency_ms,
        )

    async def announce(
        self, proposal: Proposal, *, conversation_id: str, tenant: str, key: str, in_reply_to: str | None = None
    ) -> Suggestion | None:
        """Say what a scheduled job proposes about a conversation (a reminder, a warning before a breach): reviewed
        by its kind's gates (with no event), then stored and published as an event's suggestions are.

        ``key`` names what is said (a timer and its stage): the same key makes the same suggestion, so a job that
        says it twice (it fired again after a crash) publishes the same suggestion id, with what was stored first.
        Returns the suggestion as published under that id (as made now, if that id was already out), or None when
        a gate kept it quiet.
        """
        decision = await self._backoff.retry(
            "consulting the gate", partial(self._gates[proposal.kind].review, proposal, None, None)
        )
        if not decision.speak:
            self._silenced(decision.reason)
            return None
        received = self._clock.monotonic()
        suggestion = self._made(
            proposal,
            key=keyed(conversation_id, key),
            conversation_id=conversation_id,
            tenant=tenant,
            in_reply_to=in_reply_to,
            latency_ms=0.0,
        )
        stored = await self._stored([suggestion])
        await self._publish(stored, received)
        return stored[0] if stored else suggestion  # what went out under its id (the copy stored first), or was out

    def _timely(self, suggestions: list[Suggestion], event: Event, superseded: Callable[[], bool]) -> list[Suggestion]:
        """The suggestions each kind's gates still find timely, in their order."""
        if not suggestions:
            return suggestions
        by_kind: defaultdict[str, list[Suggestion]] = defaultdict(list)
        for suggestion in suggestions:
            by_kind[suggestion.kind].append(suggestion)
        late = superseded()
        kept: set[str] = set()
        for kind, of_kind in by_kind.items():
            decision = self._gates[kind].timely(event, superseded=late)
            if decision.speak:
                kept.update(s.suggestion_id for s in of_kind)
            else:
                self._silenced(decision.reason, len(of_kind))
        return [s for s in suggestions if s.suggestion_id in kept]

    async def _publish(self, suggestions: list[Suggestion], received: float) -> None:
        if not suggestions:
            return
        for suggestion in suggestions:
            for sink in self._sinks:
                await self._backoff.retry(f"publishing to {sink.name}", partial(sink.publish, suggestion))
            self._metrics.suggestions_published.labels(suggestion.kind).inc()
            self._metrics.suggestion_latency.observe(self._clock.monotonic() - received)
            for watcher in self._watchers:
                watcher.suggested(suggestion)
        fault("event.after_publish")
        await self._backoff.retry(
            "marking suggestions published", lambda: self._store.mark_published([s.suggestion_id for s in suggestions])
        )
