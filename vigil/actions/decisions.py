"""Decisions on actions, kept with the feedback that carries them: an approval or a rejection moves its action in
the transaction that records the ``feedback`` event (a ``Keeper``, ``vigil.flow.keeping``), so that an approval the
lead was told was accepted is never lost to a crash before the skill runs; the skill, after the commit, runs what
is approved.

A decision names its action by ``action_id`` (the panel's API puts it there); feedback from elsewhere names the
action's card, and the action is found through it. An action of another conversation than the feedback's is not
found: ids can be guessed, and a verdict belongs to its own conversation.
"""

from __future__ import annotations

import logging

from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.actions.approvals import Approvals
from vigil.actions.lifecycle import Refusal
from vigil.cases import actions as stored
from vigil.cases.actions import ActionRecord
from vigil.core.clock import Clock
from vigil.flow.case import CaseState
from vigil.wire.events import Event, Feedback
from vigil.wire.proof import Proofs, Unproven

log = logging.getLogger(__name__)

DECISIONS = ("approved", "rejected")
"""The feedback verdicts that decide an action."""


async def action_of(conn: AsyncConnection, event: Feedback) -> ActionRecord | None:
    """The action ``event`` decides: by its ``action_id``, else through the card it judges; None if neither names
    an action of the event's conversation."""
    found = event.action_id or await stored.of_suggestion(conn, event.suggestion_id, event.conversation_id)
    record = await stored.get(conn, found) if found else None
    return record if record is not None and record.conversation_id == event.conversation_id else None


class ApprovalKeeper:
    """Takes each approval and rejection in the transaction of its feedback event, believing only what its proof
    says (``vigil.wire.proof``): who decided and in what role come from the signed statement, never from the
    event's own fields; a decision without a proof that holds is refused, and the refusal is in the audit log."""

    name = "actions"

    def __init__(self, approvals: Approvals, proofs: Proofs, clock: Clock) -> None:
        self._approvals = approvals
        self._proofs = proofs
        self._clock = clock

    async def keep(self, conn: AsyncConnection, event: Event, case: CaseState | None) -> None:
        if not isinstance(event, Feedback) or event.verdict not in DECISIONS:
            return
        record = await action_of(conn, event)
        if record is None:
            return
        try:
            proven = self._proofs.verify(event, action_id=record.action_id, tenant=record.tenant, now=self._clock.now())
        except Unproven as exc:
            # Written down as the caller claimed to be: the audit shows what was attempted, and that it was refused.
            why: tuple[Refusal, str] = ("unproven", f"{exc.failure}: {exc.detail}")
            decision = await self._approvals.refuse(conn, record, why, by=event.by or "unknown", role=event.role)
        else:
            decision = await self._approvals.decide(
                conn,
                record,
                approve=event.verdict == "approved",
                by=proven.by,
                role=proven.role,
                arguments_hash=proven.arguments_hash,
                note=event.text,
            )
        if decision.refused is not None:
            log.warning(
                "%s of %s refused: %s",
                event.verdict,
                record.action_id,
                decision.refused[1],
                extra={"conversation_id": event.conversation_id},
            )
