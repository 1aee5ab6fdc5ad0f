"""The action's life as data: the moves the table allows and none other, what is final, what may be asked for again,
what is shown as waiting, and who may approve or reject what."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from vigil.actions.lifecycle import (
    AGAIN,
    FINAL,
    OPEN,
    TRANSITIONS,
    UNSETTLED,
    Status,
    Trigger,
    next_status,
    phase,
    refusal,
    sources,
)
from vigil.cases.actions import ActionRecord

T0 = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)

S = Status
LIFE = [
    # (status, trigger, where it leads; None: no such move)
    (S.SUGGESTED, Trigger.APPROVED, S.APPROVED),
    (S.SUGGESTED, Trigger.REJECTED, S.REJECTED),
    (S.SUGGESTED, Trigger.EXPIRED, S.EXPIRED),
    (S.SUGGESTED, Trigger.CLAIMED, None),  # nothing runs unapproved
    (S.APPROVED, Trigger.CLAIMED, S.EXECUTING),
    (S.APPROVED, Trigger.REJECTED, None),  # decided once
    (S.APPROVED, Trigger.EXPIRED, None),  # an approval does not expire
    (S.APPROVED, Trigger.TAKEN_OVER, S.EXECUTING),
    (S.APPROVED, Trigger.GUARDED, S.BLOCKED),  # a chain completed since it was suggested: never run
    (S.EXECUTING, Trigger.GUARDED, None),  # it may have run: settled, not blocked
    (S.IN_DOUBT, Trigger.GUARDED, None),
    (S.EXECUTING, Trigger.SUCCEEDED, S.EXECUTED),
    (S.EXECUTING, Trigger.REFUSED, S.FAILED),
    (S.EXECUTING, Trigger.UNSURE, S.IN_DOUBT),
    (S.EXECUTING, Trigger.TAKEN_OVER, S.EXECUTING),
    (S.EXECUTING, Trigger.CLAIMED, None),  # a second run only through the reconciler, once the claim lapsed
    (S.IN_DOUBT, Trigger.TAKEN_OVER, S.EXECUTING),
    (S.IN_DOUBT, Trigger.SUCCEEDED, None),  # settled by a new claim's call, never from aside
    (S.IN_DOUBT, Trigger.REFUSED, None),
    (S.EXECUTED, Trigger.TAKEN_OVER, None),
    (S.FAILED, Trigger.TAKEN_OVER, None),
    (S.DECLINED, Trigger.APPROVED, None),
    (S.BLOCKED, Trigger.APPROVED, None),
    (S.EXPIRED, Trigger.APPROVED, None),
    (S.REJECTED, Trigger.APPROVED, None),
]


@pytest.mark.parametrize(("status", "trigger", "to"), LIFE)
def test_each_move_is_in_the_table_and_no_other(status: Status, trigger: Trigger, to: Status | None):
    assert next_status(status, trigger) == to


def test_redeciding_keeps_an_action_open_or_declines_it():
    assert next_status(S.SUGGESTED, Trigger.REDECIDED, S.DECLINED) == S.DECLINED
    assert next_status(S.SUGGESTED, Trigger.REDECIDED, S.SUGGESTED) == S.SUGGESTED
    assert next_status(S.APPROVED, Trigger.REDECIDED) is None


def test_final_statuses_are_left_by_no_move():
    assert all(status not in t.from_ for t in TRANSITIONS for status in FINAL)


def test_only_approvals_and_rejections_are_a_persons_moves():
    assert {t.trigger for t in TRANSITIONS if t.by == "person"} == {Trigger.APPROVED, Trigger.REJECTED}


def test_the_store_is_given_the_statuses_a_move_may_leave():
    assert sources(Trigger.APPROVED, S.APPROVED) == ("suggested",)
    assert sources(Trigger.TAKEN_OVER, S.EXECUTING) == ("approved", "executing", "in_doubt")
    with pytest.raises(ValueError, match="no move"):
        sources(Trigger.APPROVED, S.EXECUTED)


def test_what_is_unsettled_what_may_be_asked_again_and_what_is_open():
    assert set(UNSETTLED) == {S.APPROVED, S.EXECUTING, S.IN_DOUBT}
    assert set(AGAIN) == {S.EXPIRED, S.REJECTED, S.FAILED}  # over, and nothing done
    assert S.EXECUTED not in AGAIN and S.IN_DOUBT not in AGAIN  # the money may have moved
    assert OPEN == (S.SUGGESTED,)


def test_an_action_that_waits_for_the_conversation_is_shown_waiting_not_stored_so():
    assert phase("suggested", "deny") == "waiting"
    assert phase("suggested", "needs_approval") == "suggested"
    assert phase("declined", "deny") == "declined"
    assert S.WAITING not in {t.to for t in TRANSITIONS}


def record(**changes: object) -> ActionRecord:
    values: dict[str, object] = {
        "action_id": "act-1", "conversation_id": "c-1", "tenant": "acme", "name": "refund_order",
        "arguments": {"order_id": "ORD-1", "amount_cents": 9000}, "arguments_hash": "a" * 64,
        "verdict": "needs_approval", "rule": "large_refund_needs_lead", "reason": "Large refunds need a lead.",
        "status": "suggested", "suggested_at": T0, "approver": "lead", "expires_at": T0 + timedelta(hours=1),
    }  # fmt: skip
    return ActionRecord(**(values | changes))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "approve", "role", "digest", "why"),
    [
        ({}, True, "lead", "a" * 64, None),
        ({}, True, "admin", None, None),
        ({}, True, "analyst", "a" * 64, "not_permitted"),
        ({}, True, None, "a" * 64, "not_permitted"),
        ({}, False, "analyst", None, None),  # any analyst may reject
        ({}, False, None, None, "not_permitted"),
        ({}, True, "lead", "b" * 64, "arguments_changed"),
        ({"expires_at": T0}, True, "lead", None, "expired"),
        ({"verdict": "deny", "rule": "identity_not_verified"}, True, "admin", None, "not_runnable"),
        ({"status": "declined", "verdict": "deny"}, True, "admin", None, "not_open"),
        ({"status": "executing"}, True, "lead", None, "not_open"),
        ({"status": "executed"}, True, "lead", None, "not_open"),
        ({"status": "approved"}, False, "lead", None, "not_open"),  # too late to reject
        ({"status": "approved", "expires_at": T0}, True, "lead", None, None),  # resumes it, even past its window
        ({"status": "approved"}, True, "analyst", None, "not_permitted"),  # resumes only for who may approve
        ({"verdict": "allow", "approver": None}, True, "analyst", None, None),
    ],
)
def test_who_may_approve_or_reject_what(
    changes: dict[str, object], approve: bool, role: str | None, digest: str | None, why: str | None
):
    refused = refusal(record(**changes), approve=approve, by="someone", role=role, arguments_hash=digest, now=T0)
    assert (refused[0] if refused else None) == why


@pytest.mark.parametrize(
    ("by", "separate_from", "why"),
    [
        ("ana", ["proposer", "reader"], "same_person"),  # she proposed it
        ("raj", ["proposer", "reader"], "same_person"),  # he read it back
        ("raj", ["proposer"], None),  # the rule keeps only the proposer out
        ("lee", ["proposer", "reader"], None),  # a second analyst
        ("ana", None, None),  # a rule without @separate_from: the role is all that counts
    ],
)
def test_a_rule_can_keep_the_analyst_who_proposed_or_read_back_an_action_from_approving_it(
    by: str, separate_from: list[str] | None, why: str | None
):
    held = record(
        approver="analyst",
        rule="refund_needs_approval",
        separate_from=separate_from,
        facts={"_people": {"proposer": "ana", "reader": "raj"}},
    )
    refused = refusal(held, approve=True, by=by, role="lead", arguments_hash="a" * 64, now=T0)
    assert (refused[0] if refused else None) == why
    if refused:
        assert by in refused[1] and "another person approves it" in refused[1]
    # Rejecting is not approving: whoever handled it may still turn it down.
    assert refusal(held, approve=False, by=by, role="analyst", arguments_hash=None, now=T0) is None
