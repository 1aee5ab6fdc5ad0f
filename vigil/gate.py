"""The gate: the one place that decides whether a proposal is said, and why not when it is not.

Silence is a decision with a reason, counted in ``vigil_suggestions_suppressed_total{reason}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from vigil.cases import CaseState
from vigil.events import CaseEvent, Feedback, Message
from vigil.skills import Proposal


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
    """Reviews every proposal before it becomes a suggestion."""

    async def review(
        self, proposal: Proposal, event: Message | CaseEvent | Feedback, case: CaseState | None
    ) -> Decision: ...


class ConfidenceGate:
    """The base rule every gate keeps: never speak below ``min_confidence``."""

    def __init__(self, min_confidence: float) -> None:
        self._min_confidence = min_confidence

    async def review(
        self, proposal: Proposal, event: Message | CaseEvent | Feedback, case: CaseState | None
    ) -> Decision:
        if proposal.confidence < self._min_confidence:
            return Decision.silence("low_confidence")
        return Decision.allow()
