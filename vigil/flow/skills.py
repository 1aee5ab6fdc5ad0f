"""Skills: the capabilities that look at an event and its case and may propose suggestions.

A skill does not publish and does not know the transport: it returns proposals, the gate decides which are said.
A capability's ``setup`` returns its skills (``Capability.skills``); adding one never means editing the pipeline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from vigil.flow.case import CaseState
from vigil.wire.events import Action, Event, SourceRef, StepRef, SuggestionKind


@dataclass(frozen=True, slots=True)
class Proposal:
    """Something a skill would like to say to the analyst."""

    kind: SuggestionKind
    text: str
    confidence: float
    sources: tuple[SourceRef, ...] = ()
    action: Action | None = None
    why: str = ""
    step: StepRef | None = None


class Skill(Protocol):
    """A capability of the copilot."""

    name: str
    kind: SuggestionKind
    """What it proposes; the gate admits or refuses it by kind before it works."""

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        """What to suggest after ``event`` (already stored and applied to ``case``); empty to stay quiet."""
        ...
