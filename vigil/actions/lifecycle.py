"""An action's life, and the moves between its statuses, written as data; and who may make the moves a person makes.

    (suggested by the skill) ─► suggested | declined (the policy) | blocked (the guard)
    suggested ─redecided─► suggested | declined          (the conversation answered a precondition)
    suggested ─approved─► approved ─claimed─► executing ─succeeded─► executed
                          approved ─guarded─► blocked   (as it is claimed, it would complete a dangerous chain)
                                                        ─refused──► failed     (the system said no, or never called)
                                                        ─unsure───► in_doubt   (a timeout: the change may be made)
    approved | executing (claim lapsed) | in_doubt ─taken_over─► executing     (the reconciler re-sends the call)
    suggested ─rejected─► rejected      suggested ─expired─► expired

``TRANSITIONS`` is the whole table: for each trigger, the status it leads to and the statuses it may leave. The case
store persists a move as one guarded ``UPDATE ... WHERE status IN (sources)`` with its audit step in the same
transaction (``vigil.cases.actions.move``), so two replicas or two clicks never both make it; ``next_status``
applies the table in Python, for tests and the documentation.

``waiting`` is not stored: it is a ``suggested`` action whose verdict is ``deny`` (a precondition the conversation
has still to meet: the identity check, the customer's yes; a denial that is no precondition is ``declined``), shown
as such by ``phase``. Storing it would take it out of what the conjunctive-risk guard counts as pending, and every
move out of it is the same as out of ``suggested``.

``refusal`` is the rule of who may approve or reject an action, asked by the approval gates and, before the
decision goes onto the stream, by the panel's API and the buttons it draws (the one place the panel reads
``vigil.actions``, by a declared exception to the packages' independence: this module is data and rules only).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Literal, get_args

from vigil.cases.actions import ActionRecord
from vigil.wire.events import ApproverRole


class Status(StrEnum):
    """Where an action stands."""

    SUGGESTED = "suggested"
    """Waiting for a person's decision (or, with a ``deny`` verdict, for the conversation: ``WAITING``)."""
    WAITING = "waiting"
    """Shown, never stored: a ``suggested`` action whose precondition the conversation has yet to meet."""
    APPROVED = "approved"
    """Decided: it is to run; the skill runs it after the approval's commit, else the reconciler does."""
    EXECUTING = "executing"
    """Claimed for a call to its system (``claimed_at``); taken over by the reconciler when the claim lapses."""
    IN_DOUBT = "in_doubt"
    """The call's outcome is unknown (a timeout): the system may have made the change; the reconciler re-sends it
    with the same idempotency key until the system's answer settles it."""
    EXECUTED = "executed"
    FAILED = "failed"
    """The system refused it, or it could never be called (no connector, arguments that fill no path)."""
    REJECTED = "rejected"
    EXPIRED = "expired"
    DECLINED = "declined"
    """The policy denies it; never runs."""
    BLOCKED = "blocked"
    """The conjunctive-risk guard blocked it; never runs."""


class Trigger(StrEnum):
    """What happened to an action."""

    REDECIDED = "redecided"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CLAIMED = "claimed"
    GUARDED = "guarded"
    """The conjunctive-risk guard, checked again as an approved action is claimed, found it completes a chain."""
    TAKEN_OVER = "taken_over"
    SUCCEEDED = "succeeded"
    REFUSED = "refused"
    UNSURE = "unsure"


Actor = Literal["person", "vigil"]


@dataclass(frozen=True, slots=True)
class Transition:
    """``trigger`` moves an action from any of ``from_`` to ``to``; ``by`` says who may pull it."""

    trigger: Trigger
    to: Status
    from_: tuple[Status, ...]
    by: Actor = "vigil"


S = Status
TRANSITIONS: tuple[Transition, ...] = (
    Transition(Trigger.REDECIDED, S.SUGGESTED, (S.SUGGESTED,)),
    Transition(Trigger.REDECIDED, S.DECLINED, (S.SUGGESTED,)),
    Transition(Trigger.APPROVED, S.APPROVED, (S.SUGGESTED,), by="person"),
    Transition(Trigger.REJECTED, S.REJECTED, (S.SUGGESTED,), by="person"),
    Transition(Trigger.EXPIRED, S.EXPIRED, (S.SUGGESTED,)),
    Transition(Trigger.CLAIMED, S.EXECUTING, (S.APPROVED,)),
    Transition(Trigger.GUARDED, S.BLOCKED, (S.APPROVED,)),
    Transition(Trigger.TAKEN_OVER, S.EXECUTING, (S.APPROVED, S.EXECUTING, S.IN_DOUBT)),
    Transition(Trigger.SUCCEEDED, S.EXECUTED, (S.EXECUTING,)),
    Transition(Trigger.REFUSED, S.FAILED, (S.EXECUTING,)),
    Transition(Trigger.UNSURE, S.IN_DOUBT, (S.EXECUTING,)),
)
"""Every move; no other is ever made (``declined``, ``blocked``, ``executed``, ``failed``, ``rejected`` and
``expired`` are final)."""

FIRST: tuple[Status, ...] = (S.SUGGESTED, S.DECLINED, S.BLOCKED)
"""The statuses an action is stored with."""
OPEN: tuple[Status, ...] = (S.SUGGESTED,)
"""Waiting for a decision: what an approval or a rejection may move."""
UNSETTLED: tuple[Status, ...] = (S.APPROVED, S.EXECUTING, S.IN_DOUBT)
"""Decided to run, not yet known to have run or not: what the reconciler settles."""
AGAIN: tuple[Status, ...] = (S.EXPIRED, S.REJECTED, S.FAILED)
"""Over without having done anything: the same request may be suggested again, as a new action."""
FINAL: tuple[Status, ...] = (S.EXECUTED, S.FAILED, S.REJECTED, S.EXPIRED, S.DECLINED, S.BLOCKED)

RANKS: tuple[str, ...] = get_args(ApproverRole)
"""The roles that may decide actions, lowest first (the wire's and the panel's roles)."""

Refusal = Literal[
    "unknown_action",
    "not_open",
    "expired",
    "arguments_changed",
    "not_permitted",
    "not_runnable",
    "same_person",
    "unproven",
]
"""Why a decision is refused; ``unproven``: its proof of who gave it does not hold (``vigil.wire.proof``)."""


def sources(trigger: Trigger, to: Status) -> tuple[str, ...]:
    """The statuses ``trigger`` may move an action out of to reach ``to`` (the guarded UPDATE's ``IN`` list).

    Raises:
        ValueError: the table has no such move.
    """
    for transition in TRANSITIONS:
        if transition.trigger is trigger and transition.to is to:
            return tuple(s.value for s in transition.from_)
    raise ValueError(f"no move {trigger} to {to}")


def next_status(status: str, trigger: Trigger, to: Status | None = None) -> Status | None:
    """Where ``trigger`` takes an action in ``status`` (``to`` picks among a trigger's outcomes), or None when the
    table has no such move."""
    for transition in TRANSITIONS:
        if transition.trigger is trigger and status in transition.from_ and to in (None, transition.to):
            return transition.to
    return None


def phase(status: str, verdict: str) -> str:
    """The status as people see it: ``waiting`` for a suggested action that waits for the conversation."""
    return S.WAITING.value if status == S.SUGGESTED and verdict == "deny" else status


def may_approve(role: str | None, needed: str) -> bool:
    """Whether ``role`` is ``needed`` or above (an unknown ``needed`` takes the highest role)."""
    return role in RANKS and RANKS.index(role) >= RANKS.index(needed if needed in RANKS else RANKS[-1])


def refusal(
    record: ActionRecord,
    *,
    approve: bool,
    by: str | None,
    role: str | None,
    arguments_hash: str | None,
    now: datetime,
) -> tuple[Refusal, str] | None:
    """Why ``by``, as ``role``, may not approve (or reject) ``record`` now, or None if they may: it is no longer
    open, it has expired, the arguments are not those approved, the role is below the rule's approver, the rule
    keeps this person from approving it (``separate_from``: they proposed it or read it back), or it may never run.

    Approving an action already ``approved`` is not refused: it resumes it (an approval taken just before a crash,
    whose run never started, runs on the next approval as it would on the reconciler's next look)."""
    resumes = approve and record.status == S.APPROVED
    if record.status not in OPEN and not resumes:
        return "not_open", f"{record.action_id} is {record.status}, not waiting for a decision"
    if not resumes and record.expires_at is not None and now >= record.expires_at:
        return "expired", f"{record.action_id} expired at {record.expires_at.isoformat()}"
    if arguments_hash is not None and arguments_hash != record.arguments_hash:
        return "arguments_changed", "the arguments are not those suggested; changed arguments are another action"
    if not approve:
        return None if may_approve(role, "analyst") else ("not_permitted", f"{role or 'nobody'} may not decide actions")
    if record.verdict not in ("allow", "needs_approval"):
        return "not_runnable", f"{record.rule}: {record.reason}"
    needed = record.approver if record.verdict == "needs_approval" and record.approver else "analyst"
    if not may_approve(role, needed):
        return (
            "not_permitted",
            f"{record.rule}: a {needed} approves this action, not {role or 'a caller without a role'}",
        )
    did = [_DID[part] for part in separated(record) if by is not None and _named(by, handled_by(record, part))]
    if did:
        return "same_person", f"{record.rule}: {by} {' and '.join(did)} this action; another person approves it"
    return None


_DID = {"proposer": "proposed", "reader": "read back"}


def separated(record: ActionRecord) -> list[str]:
    """Whom the rule that holds ``record`` keeps from approving it (``proposer``, ``reader``), in that order."""
    if record.verdict != "needs_approval" or not record.separate_from:
        return []
    return [part for part in _DID if part in record.separate_from]


def handled_by(record: ActionRecord, part: str) -> list[str]:
    """Who ``part`` (``proposer``, ``reader``) of ``record`` was, as the messages' authors say (empty: unknown)."""
    people = record.facts.get("_people")
    named = people.get(part) if isinstance(people, dict) else None
    if isinstance(named, str):  # kept by a revision that named one person
        return [named]
    return [str(n) for n in named] if isinstance(named, list) else []


def _named(by: str, people: list[str]) -> bool:
    """Whether ``by`` is one of ``people``: names compared without regard to case or surrounding space."""
    wanted = by.strip().casefold()
    return any(wanted == person.strip().casefold() for person in people)
