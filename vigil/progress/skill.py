"""The progress skill: after each event, say what the case's progress calls for: an escalation when the customer
keeps chasing, a handover brief when the case changes hands.

It is consulted under the kind ``progress`` (its admission), and proposes ``escalation`` and ``handover``; the
timers, commitments and reading are written by the progress keeper in the event's own transaction
(vigil/progress/keeper.py); the next step of the procedure is the next-step skill's (vigil/progress/next_step.py),
and reminders are the sweep's (vigil/progress/reminders.py).

It writes nothing, so asking it twice about one event (a redelivery before the skills had finished with it) says
the same twice, under the same suggestion ids:
- a customer's message: once an analyst has answered, an ``escalation`` on the message that makes the customer's
  chasing or mood call for one (the pressure the keeper found, or read again after a redelivery);
- ``escalated``, or ``assigned`` to someone else than before: a ``handover`` brief (vigil/cases/handover.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncEngine

from vigil.cases import handover, progress
from vigil.cases.states import State
from vigil.core.clock import Clock
from vigil.db.engine import guarded
from vigil.flow.case import CaseState
from vigil.flow.skills import Proposal
from vigil.progress.keeper import RECENT, Pressed, ProgressKeeper, pressed
from vigil.progress.settings import ProgressSettings
from vigil.wire.events import CaseEvent, Event, Message

log = logging.getLogger(__name__)


class ProgressSkill:
    """Proposes escalations and handovers."""

    name = "progress"
    kind = "progress"

    def __init__(
        self,
        *,
        engine: AsyncEngine,
        settings: ProgressSettings,
        clock: Clock,
        keeper: ProgressKeeper,
        timeout_s: float | None = None,
    ) -> None:
        """``timeout_s`` bounds each read; database errors come out as vigil's (an unreachable database is
        ``StoreUnavailable``: the pipeline asks again with back-off)."""
        self._engine = engine
        self._timeout_s = timeout_s
        self._settings = settings
        self._clock = clock
        self._keeper = keeper

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        if case is None:
            return []
        if isinstance(event, Message) and event.role == "customer":
            return await self._escalation(event, case)
        if isinstance(event, CaseEvent) and event.event in ("escalated", "assigned"):
            return await self._handover(event, case)
        return []

    async def _escalation(self, message: Message, case: CaseState) -> list[Proposal]:
        """Propose escalating on the message that makes the customer's pressure call for one."""
        found = self._keeper.take_pressed(case.conversation_id, message.message_id)
        # Before a first answer the first-response clock speaks for the customer; once escalated, it is done.
        if case.first_response_at is None or case.state == State.WAITING_ON_INTERNAL:
            return []
        if found is None:  # kept by an earlier run of vigil: read again
            found = await self._pressed(case.conversation_id)
        if not found.now.escalate or found.before.escalate:
            return []
        why = found.now.why
        return [
            Proposal(
                kind="escalation",
                text=f"{why[:1].upper()}{why[1:]}. Consider escalating, or give them a concrete update and a time.",
                confidence=0.8,
                why="the customer keeps chasing, or is getting angrier",
            )
        ]

    async def _pressed(self, conversation_id: str) -> Pressed:
        async with guarded(self._engine, timeout_s=self._timeout_s, begin=False) as conn:
            waiting = await progress.waiting(conn, [conversation_id], recent=RECENT)
        return pressed(waiting[conversation_id])

    async def _handover(self, event: CaseEvent, case: CaseState) -> list[Proposal]:
        """A brief for whoever takes the case over, when it is escalated or assigned to someone else."""
        async with guarded(self._engine, timeout_s=self._timeout_s, begin=False) as conn:
            if event.event == "assigned":
                before = await progress.assignee_before(conn, case.conversation_id, event.event_id)
                if before in (None, event.assignee):
                    return []
            brief = await handover.brief(conn, case.conversation_id, zone=self._settings.zone(case.tenant))
        if brief is None:
            return []
        why = "the case was escalated" if event.event == "escalated" else f"the case was reassigned to {event.assignee}"
        return [Proposal(kind="handover", text=brief.text, confidence=1.0, why=why)]
