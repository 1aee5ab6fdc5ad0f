"""A case's state through its life, and the transitions between states, written as data.

    new ─customer─► new ─analyst─► waiting_on_customer ─customer─► waiting_on_analyst ─analyst─► ...
    waiting_on_customer ─promised─► waiting_on_analyst (the analyst's message left a timed promise open)
    any open state ─escalated─► waiting_on_internal ─analyst─► (stays: the other team has it) ─status open─► ...
    any state ─status resolved─► resolved ─customer─► waiting_on_analyst (a reply reopens a resolved case)
    any state ─closed─► closed ─reopened─► waiting_on_analyst

``TRANSITIONS`` is the whole table: for each trigger, the state it leads to, from which states (every one when
``from_`` is empty). A trigger with no row for the current state leaves it as it is. The case store applies the
table in SQL, inside the transaction that records the event (``sql_next``), so that a state is never a step behind
its events; ``next_state`` applies it in Python, for tests, replays and the documentation.

A ``status`` event names the platform's own status; ``STATUS_TRIGGERS`` maps the usual names onto triggers (an
unknown status changes the platform's ``status`` but not the state).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import sqlalchemy as sa


class State(StrEnum):
    """Where a case stands."""

    NEW = "new"
    """Opened, or the customer has written, and no analyst has answered yet."""
    WAITING_ON_ANALYST = "waiting_on_analyst"
    WAITING_ON_CUSTOMER = "waiting_on_customer"
    WAITING_ON_INTERNAL = "waiting_on_internal"
    """Escalated to another team, or put on hold."""
    RESOLVED = "resolved"
    CLOSED = "closed"


class Trigger(StrEnum):
    """What happened, as far as the state is concerned."""

    OPENED = "opened"
    CUSTOMER = "customer"
    """A customer message."""
    ANALYST = "analyst"
    """An analyst message."""
    PROMISED = "promised"
    """An analyst message after which a promise with a due time is open: the analyst owes the next move until it is
    kept, and after it is missed (the progress keeper applies it, in the message's transaction)."""
    ESCALATED = "escalated"
    PENDING = "pending"
    """A status event: waiting on the customer."""
    ON_HOLD = "on_hold"
    """A status event: waiting on another team."""
    WORKING = "working"
    """A status event: back with the analyst."""
    RESOLVED = "resolved"
    CLOSED = "closed"
    REOPENED = "reopened"


OPEN = (State.NEW, State.WAITING_ON_ANALYST, State.WAITING_ON_CUSTOMER, State.WAITING_ON_INTERNAL)
"""The states of a case someone still has to work on."""


@dataclass(frozen=True, slots=True)
class Transition:
    """``trigger`` moves a case from any of ``from_`` (every state when empty) to ``to``."""

    trigger: Trigger
    to: State
    from_: tuple[State, ...] = ()


TRANSITIONS: tuple[Transition, ...] = (
    Transition(Trigger.OPENED, State.NEW),
    Transition(Trigger.CUSTOMER, State.NEW, (State.NEW,)),
    Transition(Trigger.CUSTOMER, State.WAITING_ON_ANALYST, (State.WAITING_ON_CUSTOMER, State.RESOLVED)),
    Transition(Trigger.ANALYST, State.WAITING_ON_CUSTOMER, (State.NEW, State.WAITING_ON_ANALYST)),
    Transition(Trigger.PROMISED, State.WAITING_ON_ANALYST, (State.WAITING_ON_CUSTOMER,)),
    Transition(Trigger.ESCALATED, State.WAITING_ON_INTERNAL, OPEN),
    Transition(Trigger.PENDING, State.WAITING_ON_CUSTOMER, (*OPEN, State.RESOLVED)),
    Transition(Trigger.ON_HOLD, State.WAITING_ON_INTERNAL, (*OPEN, State.RESOLVED)),
    Transition(Trigger.WORKING, State.WAITING_ON_ANALYST, (*OPEN, State.RESOLVED)),
    Transition(Trigger.RESOLVED, State.RESOLVED, (*OPEN, State.RESOLVED)),
    Transition(Trigger.CLOSED, State.CLOSED),
    Transition(Trigger.REOPENED, State.WAITING_ON_ANALYST, (State.RESOLVED, State.CLOSED)),
)
"""Every transition; what is not here leaves the state unchanged (an analyst message while escalated, a customer
message on a closed case, a second ``opened``...)."""

STATUS_TRIGGERS: dict[str, Trigger] = {
    "pending": Trigger.PENDING,
    "waiting_on_customer": Trigger.PENDING,
    "awaiting_customer": Trigger.PENDING,
    "on_hold": Trigger.ON_HOLD,
    "hold": Trigger.ON_HOLD,
    "waiting_on_internal": Trigger.ON_HOLD,
    "open": Trigger.WORKING,
    "in_progress": Trigger.WORKING,
    "waiting_on_analyst": Trigger.WORKING,
    "solved": Trigger.RESOLVED,
    "resolved": Trigger.RESOLVED,
}
"""The platform's status names (lower case, spaces and dashes as underscores) and the trigger each one is."""


def status_trigger(status: str | None) -> Trigger | None:
    """The trigger of a ``status`` event's status, or None for one vigil does not know."""
    if not status:
        return None
    return STATUS_TRIGGERS.get(status.strip().lower().replace(" ", "_").replace("-", "_"))


def next_state(state: State | None, trigger: Trigger) -> State:
    """Where ``trigger`` takes a case in ``state`` (None: a case not seen before, which starts ``new``)."""
    current = state or State.NEW
    for transition in TRANSITIONS:
        if transition.trigger is trigger and (not transition.from_ or current in transition.from_):
            return transition.to
    return current


def sql_next(current: sa.ColumnElement[Any], trigger: Trigger) -> sa.ColumnElement[Any]:
    """``next_state`` as a SQL expression over the ``current`` state column, for an upsert's update."""
    whens: list[tuple[sa.ColumnElement[bool], str]] = []
    for transition in TRANSITIONS:
        if transition.trigger is not trigger:
            continue
        if not transition.from_:
            return sa.literal(transition.to.value)  # every state leads there: nothing after this row matters
        # Literals, not one expanding parameter: the statement runs with many rows at once (executemany), which
        # cannot expand a parameter, and a failed batch is written again one event a transaction.
        whens.append((current.in_([sa.literal(s.value) for s in transition.from_]), transition.to.value))
    return sa.case(*whens, else_=current) if whens else current
