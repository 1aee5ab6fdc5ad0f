"""The gate: the one place that decides whether vigil speaks, and why not when it does not.

It is asked three times: before a skill works on an event (``admit``: is this a moment to speak at all?), for each
proposal (``review``: is this worth saying?), and just before publishing (``timely``: is it still useful?). Silence
is a decision with a reason, counted in ``vigil_suggestions_suppressed_total{reason}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from vigil.cases.writes import CaseState
from vigil.flow.skills import Proposal
from vigil.wire.events import Event, SuggestionKind


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether to speak; ``reason`` names the rule that decided."""

    speak: bool
    reason: str

    @classmethod
    def allow(cls) -> Decision:
        return cls(True, "allowed")

    @classmethod
    def silence(cls, reason: str) -> Decision:
        return cls(False, reason)


class Gate(Protocol):
    """Decides when vigil speaks."""

    async def admit(self, kind: SuggestionKind, event: Event, case: CaseState | None) -> Decision:
        """Before a skill proposing ``kind`` works on ``event``."""
        ...

    async def review(self, proposal: Proposal, event: Event, case: CaseState | None) -> Decision:
        """For each proposal a skill made."""
        ...

    def timely(self, event: Event, *, superseded: bool) -> Decision:
        """Just before publishing: ``superseded`` says a newer message of the conversation has arrived."""
        ...


class ConfidenceGate:
    """The base rule every gate keeps: never speak below ``min_confidence``; otherwise always speak."""

    def __init__(self, min_confidence: float) -> None:
        self._min_confidence = min_confidence

    async def admit(self, kind: SuggestionKind, event: Event, case: CaseState | None) -> Decision:
        return Decision.allow()

    def timely(self, event: Event, *, superseded: bool) -> Decision:
        return Decision.allow()

    async def review(self, proposal: Proposal, event: Event, case: CaseState | None) -> Decision:
        if proposal.confidence < self._min_confidence:
            return Decision.silence("low_confidence")
        return Decision.allow()
