"""Skills: the capabilities that look at an event and its case and may propose suggestions.

A skill does not publish and does not know the transport: it returns proposals, the gate decides which are said.
A capability's ``setup`` returns its skills (``Capability.skills``); adding one never means editing the pipeline.
"""

from __future__ import annotations

import uuid
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
    key: str | None = None
    """Names what is said, when the skill must know the suggestion's id (``suggestion_id``): the same key in the
    same conversation, the same id. None: the id is made from the event and the proposal's place."""


_SUGGESTION_IDS = uuid.UUID("6f1d4a52-8c1e-4f0a-9d7b-3a5c2e9b7f10")


def suggestion_id(key: str) -> str:
    """The id of the suggestion named by ``key`` (a conversation's id, then what is said)."""
    return str(uuid.uuid5(_SUGGESTION_IDS, key))


def keyed(conversation_id: str, key: str) -> str:
    """The key of what a skill or a job names ``key`` in a conversation."""
    return f"{conversation_id}/@{key}"


class Skill(Protocol):
    """A capability of the copilot."""

    name: str
    kind: SuggestionKind
    """What it proposes; the gate admits or refuses it by kind before it works."""

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        """What to suggest after ``event`` (already stored and applied to ``case``); empty to stay quiet."""
        ...
