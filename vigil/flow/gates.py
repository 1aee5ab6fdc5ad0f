"""The gates: where vigil decides whether it speaks, and why not when it does not.

A gate is asked three times: before a skill works on an event (``admit``: is this a moment to speak at all?), for each
proposal (``review``: is this worth saying?), and just before publishing (``timely``: is it still useful?). Silence
is a decision with a reason, counted in ``vigil_suggestions_suppressed_total{reason}``.

Each suggestion kind has its own ``Chain`` of gates, given by the capabilities that care about that kind and asked
in order; ``Gates`` maps each kind to its chain, and a kind no capability gates gets the base rule
(``ConfidenceGate``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from vigil.flow.case import CaseState
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

    async def review(self, proposal: Proposal, event: Event | None, case: CaseState | None) -> Decision:
        """For each proposal a skill made; ``event`` is None for what a scheduled job proposes (a reminder)."""
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

    async def review(self, proposal: Proposal, event: Event | None, case: CaseState | None) -> Decision:
        if proposal.confidence < self._min_confidence:
            return Decision.silence("low_confidence")
        return Decision.allow()


class Always:
    """The gate of a kind that is not a guess: an action's card (what the policy decided about a request, which the
    analyst must see to approve or refuse it), an escalation, a handover brief, a reminder that is due. It always
    speaks, so that no other kind's floor (the answers' confidence) can silence it."""

    async def admit(self, kind: SuggestionKind, event: Event, case: CaseState | None) -> Decision:
        return Decision.allow()

    async def review(self, proposal: Proposal, event: Event | None, case: CaseState | None) -> Decision:
        return Decision.allow()

    def timely(self, event: Event, *, superseded: bool) -> Decision:
        return Decision.allow()


class Chain:
    """Gates asked in order: vigil speaks only if each allows; the first that refuses names the reason."""

    def __init__(self, gates: Sequence[Gate]) -> None:
        self.gates = tuple(gates)

    async def admit(self, kind: SuggestionKind, event: Event, case: CaseState | None) -> Decision:
        for gate in self.gates:
            decision = await gate.admit(kind, event, case)
            if not decision.speak:
                return decision
        return Decision.allow()

    async def review(self, proposal: Proposal, event: Event | None, case: CaseState | None) -> Decision:
        for gate in self.gates:
            decision = await gate.review(proposal, event, case)
            if not decision.speak:
                return decision
        return Decision.allow()

    def timely(self, event: Event, *, superseded: bool) -> Decision:
        for gate in self.gates:
            decision = gate.timely(event, superseded=superseded)
            if not decision.speak:
                return decision
        return Decision.allow()


class Gates:
    """The chain of gates for each suggestion kind; ``base`` for a kind no capability gates."""

    def __init__(self, chains: Mapping[str, Sequence[Gate]], base: Gate) -> None:
        self._chains = {kind: Chain(gates) for kind, gates in chains.items() if gates}
        self._base = base

    @classmethod
    def of(cls, base: Gate) -> Gates:
        """The base rule for every kind."""
        return cls({}, base)

    def __getitem__(self, kind: str) -> Gate:
        return self._chains.get(kind, self._base)

    @property
    def kinds(self) -> frozenset[str]:
        """The kinds some capability gates."""
        return frozenset(self._chains)
