"""A case's state: each transition of the table, and the case store applying the same table in SQL."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cases.test_store import case, msg
from vigil.cases.states import OPEN, TRANSITIONS, State, Trigger, next_state, status_trigger
from vigil.cases.store import CaseStore

S = State
T = Trigger

EXPECTED: list[tuple[State | None, Trigger, State]] = [
    (None, T.CUSTOMER, S.NEW),
    (None, T.ANALYST, S.WAITING_ON_CUSTOMER),
    (None, T.OPENED, S.NEW),
    (S.NEW, T.CUSTOMER, S.NEW),
    (S.NEW, T.ANALYST, S.WAITING_ON_CUSTOMER),
    (S.WAITING_ON_CUSTOMER, T.CUSTOMER, S.WAITING_ON_ANALYST),
    (S.WAITING_ON_CUSTOMER, T.ANALYST, S.WAITING_ON_CUSTOMER),
    (S.WAITING_ON_ANALYST, T.CUSTOMER, S.WAITING_ON_ANALYST),
    (S.WAITING_ON_ANALYST, T.ANALYST, S.WAITING_ON_CUSTOMER),
    (S.WAITING_ON_ANALYST, T.ESCALATED, S.WAITING_ON_INTERNAL),
    (S.NEW, T.ESCALATED, S.WAITING_ON_INTERNAL),
    (S.WAITING_ON_INTERNAL, T.ANALYST, S.WAITING_ON_INTERNAL),
    (S.WAITING_ON_INTERNAL, T.CUSTOMER, S.WAITING_ON_INTERNAL),
    (S.WAITING_ON_INTERNAL, T.WORKING, S.WAITING_ON_ANALYST),
    (S.WAITING_ON_ANALYST, T.PENDING, S.WAITING_ON_CUSTOMER),
    (S.WAITING_ON_CUSTOMER, T.ON_HOLD, S.WAITING_ON_INTERNAL),
    (S.WAITING_ON_CUSTOMER, T.RESOLVED, S.RESOLVED),
    (S.RESOLVED, T.CUSTOMER, S.WAITING_ON_ANALYST),
    (S.RESOLVED, T.ANALYST, S.RESOLVED),
    (S.RESOLVED, T.CLOSED, S.CLOSED),
    (S.WAITING_ON_ANALYST, T.CLOSED, S.CLOSED),
    (S.CLOSED, T.CUSTOMER, S.CLOSED),
    (S.CLOSED, T.ANALYST, S.CLOSED),
    (S.CLOSED, T.ESCALATED, S.CLOSED),
    (S.CLOSED, T.RESOLVED, S.CLOSED),
    (S.CLOSED, T.REOPENED, S.WAITING_ON_ANALYST),
    (S.RESOLVED, T.REOPENED, S.WAITING_ON_ANALYST),
    (S.WAITING_ON_CUSTOMER, T.REOPENED, S.WAITING_ON_CUSTOMER),
    (S.WAITING_ON_CUSTOMER, T.OPENED, S.NEW),
    (S.WAITING_ON_CUSTOMER, T.PROMISED, S.WAITING_ON_ANALYST),
    (S.WAITING_ON_INTERNAL, T.PROMISED, S.WAITING_ON_INTERNAL),  # another team has it: the promise waits on them
    (S.RESOLVED, T.PROMISED, S.RESOLVED),
]


@pytest.mark.parametrize(("state", "trigger", "expected"), EXPECTED)
def test_each_transition(state: State | None, trigger: Trigger, expected: State):
    assert next_state(state, trigger) is expected


def test_every_row_of_the_table_is_specified_above():
    specified = {(state or S.NEW, trigger) for state, trigger, _ in EXPECTED}
    for transition in TRANSITIONS:
        sources = transition.from_ or tuple(State)
        assert any((s, transition.trigger) in specified for s in sources), transition


def test_open_states_are_those_someone_still_works_on():
    assert S.RESOLVED not in OPEN and S.CLOSED not in OPEN and len(OPEN) == 4


@pytest.mark.parametrize(
    ("status", "trigger"),
    [("pending", T.PENDING), ("On Hold", T.ON_HOLD), ("solved", T.RESOLVED), ("in-progress", T.WORKING), ("x", None)],
)
def test_platform_statuses_map_onto_triggers(status: str, trigger: Trigger | None):
    assert status_trigger(status) is trigger


async def _states(store: CaseStore, events: list[Any]) -> list[tuple[str, Any]]:
    out = []
    for e in events:
        recorded = await store.record(e)
        assert recorded.case is not None
        out.append((recorded.case.state, recorded.case.state_since))
    return out


async def test_the_store_applies_the_table_as_each_event_is_recorded(store: CaseStore):
    events = [
        msg(1),  # new
        msg(2),  # still new, since the first
        msg(3, role="analyst"),  # waiting on the customer
        msg(4),  # waiting on the analyst
        case(5, "escalated"),
        msg(6, role="analyst"),  # stays with the other team
        case(7, "status", status="solved"),
        msg(8),  # a reply reopens it
        case(9, "closed"),
        msg(10),  # closed stays closed
        case(11, "reopened"),
        msg(12, role="bot"),  # a bot changes nothing
    ]
    got = await _states(store, events)
    assert [state for state, _ in got] == [
        "new",
        "new",
        "waiting_on_customer",
        "waiting_on_analyst",
        "waiting_on_internal",
        "waiting_on_internal",
        "resolved",
        "waiting_on_analyst",
        "closed",
        "closed",
        "waiting_on_analyst",
        "waiting_on_analyst",
    ]
    since = [s for _, s in got]
    assert since[1] == since[0] == events[0].occurred_at  # a trigger that keeps the state keeps its since
    assert since[2] == events[2].occurred_at
    assert since[5] == since[4] == events[4].occurred_at
    assert since[9] == since[8] == events[8].occurred_at
    assert since[11] == since[10] == events[10].occurred_at


async def test_a_redelivered_event_does_not_move_the_state_again(store: CaseStore):
    await _states(store, [msg(1), msg(2, role="analyst")])
    again = await store.record(msg(1))
    assert not again.new
    after = await store.record(case(3, "assigned", assignee="sam"))
    assert after.case is not None and after.case.state == "waiting_on_customer"
