"""The case as a skill sees it: a conversation's state after an event, and what recording the event did."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class CaseState:
    """A conversation's state after an event, as skills see it."""

    conversation_id: str
    tenant: str
    status: str
    assignee: str | None
    priority: str | None
    opened_at: datetime
    updated_at: datetime
    closed_at: datetime | None
    message_count: int
    last_customer_at: datetime | None = None
    last_analyst_at: datetime | None = None
    first_customer_at: datetime | None = None
    first_response_at: datetime | None = None
    state: str = "new"
    """Where the case stands (vigil/cases/states.py: new, waiting_on_analyst, ..., closed)."""
    state_since: datetime | None = None
    """When it came to stand there."""

    @property
    def waiting_since(self) -> datetime | None:
        """When the customer's unanswered message came, or None if the analyst has replied since."""
        if self.last_customer_at is None or self.status == "closed":
            return None
        if self.last_analyst_at is not None and self.last_analyst_at >= self.last_customer_at:
            return None
        return self.last_customer_at


@dataclass(frozen=True, slots=True)
class Recorded:
    """The outcome of recording one event: whether it was new, and the case after it."""

    new: bool
    case: CaseState | None = None
    """The case after the event; for an event stored before and not finished, the case as it stands now."""
    suggestion_kind: str | None = None
    """For feedback: the kind of the suggestion it judges (None if vigil does not know that suggestion)."""
    finished: bool = False
    """For an event stored before: whether the skills had finished with it (if not, they are shown it again)."""
