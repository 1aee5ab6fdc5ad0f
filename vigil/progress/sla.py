"""SLA clocks: which of a case's targets are running after an event, and when each falls due.

Three clocks, each with a target per tenant and priority (``ProgressSettings.sla``):
- **first response**: from the customer's first message until an analyst first answers;
- **next response**: while the customer waits on the analyst after that (``waiting_on_analyst``), from the
  message they are waiting on; each wait is a timer of its own;
- **resolution**: from the case's opening until it is resolved or closed (a reopened case runs on the same clock).

Escalated cases (``waiting_on_internal``) stop the response clocks: another team has the case. Each timer is warned
of ``warn_before_s`` before it falls due (at most half its target). A target counts round the clock, unless the SLA
says it counts working time (``Targets.working_time``): then only the tenant's business hours and working days count
(``ProgressSettings.hours``, public holidays included: vigil/progress/hours.py), in the tenant's time zone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from vigil.cases.states import State
from vigil.cases.timers import CLOCKS, FIRST_RESPONSE, NEXT_RESPONSE, RESOLUTION, Arm
from vigil.flow.case import CaseState
from vigil.progress.settings import ProgressSettings, Targets

__all__ = ["CLOCKS", "FIRST_RESPONSE", "LABELS", "NEXT_RESPONSE", "RESOLUTION", "Plan", "plan", "timer_id"]

LABELS = {FIRST_RESPONSE: "First response", NEXT_RESPONSE: "Reply to the customer", RESOLUTION: "Resolution"}
"""How the analyst is told of each clock."""


@dataclass(frozen=True, slots=True)
class Plan:
    """The SLA timers a case should have running now (``arm``); the others of ``CLOCKS`` are cancelled."""

    arm: list[Arm] = field(default_factory=list)

    @property
    def keep(self) -> list[str]:
        return [a.timer_id for a in self.arm]


def timer_id(conversation_id: str, clock: str, started_at: datetime | None = None) -> str:
    """A timer's id: one per clock, and one per wait for the next-response clock."""
    suffix = f"@{started_at.isoformat()}" if clock == NEXT_RESPONSE and started_at is not None else ""
    return f"{conversation_id}/sla/{clock}{suffix}"


def plan(case: CaseState, settings: ProgressSettings, targets: Targets | None = None) -> Plan:
    """The SLA timers ``case`` should have running after its latest event (``targets``: the case's, if the caller
    has them already)."""
    if case.state in (State.RESOLVED, State.CLOSED):
        return Plan()
    if targets is None:
        targets = settings.targets(case.tenant, case.priority)
    armed: list[Arm] = []

    calendar = settings.calendar(case.tenant) if targets.working_time else None

    def add(clock: str, started_at: datetime, target_s: float | None) -> None:
        if target_s is None:
            return
        if calendar is None:
            due = started_at + timedelta(seconds=target_s)
        else:
            due = calendar.add(started_at, target_s, settings.zone(case.tenant))
        lead = min(settings.warn_before_s, target_s / 2)
        armed.append(
            Arm(
                timer_id=timer_id(case.conversation_id, clock, started_at),
                conversation_id=case.conversation_id,
                tenant=case.tenant,
                kind=clock,
                started_at=started_at,
                due_at=due,
                warn_at=due - timedelta(seconds=lead) if lead > 0 else None,
                priority=case.priority,
            )
        )

    add(RESOLUTION, case.opened_at, targets.resolution_s)
    if case.state != State.WAITING_ON_INTERNAL:
        if case.first_response_at is None and case.first_customer_at is not None:
            add(FIRST_RESPONSE, case.first_customer_at, targets.first_response_s)
        elif case.first_response_at is not None and case.state == State.WAITING_ON_ANALYST:
            waiting = case.waiting_since
            if waiting is not None:
                add(NEXT_RESPONSE, waiting, targets.next_response_s)
    return Plan(armed)
