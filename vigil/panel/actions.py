"""The API of the actions vigil suggests: approve or reject one (``POST /api/actions/{id}/approve|reject``) and
read a case's audit log (``GET /api/conversations/{id}/audit``).

An approval is checked here first, so the caller hears at once why it cannot be taken (403: not their role to
approve, or the rule keeps them from approving what they proposed or read back; 409: no longer open, expired, other
arguments than those shown, or an action that may never run), then goes onto the input stream as a ``feedback``
event naming the action, the caller, their role and the arguments' hash, with a signed statement of all of it
(``vigil.wire.proof``): the daemon believes the signature, not the event's fields. It takes the decision in the
conversation's order, checks it again, records it with the event, and then runs what is approved. Approving an
action already approved whose run has not started resumes it. The audit log has no route that writes it.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from vigil.actions.lifecycle import refusal
from vigil.cases.actions import AuditEntry
from vigil.cases.views import CaseViews
from vigil.core.clock import Clock
from vigil.panel.identity import Identity
from vigil.transport.base import Outbox
from vigil.wire.events import Feedback
from vigil.wire.proof import Proofs

Responses = dict[int | str, dict[str, Any]]
_ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
_STATUS = {"not_permitted": 403, "same_person": 403, "unknown_action": 404}


class Decision(BaseModel):
    """An approval or rejection of an action, as the panel sends it."""

    arguments_hash: str = Field(
        pattern=r"^[0-9a-f]{64}$", description="The action's `arguments_hash` as shown: approving binds to it."
    )
    reason: str | None = Field(default=None, max_length=2000, description="For a rejection: why, if given.")


class DecisionAccepted(BaseModel):
    """The decision is on the input stream; the action's status changes as vigil takes it."""

    feedback_id: str
    action_id: str


def action_routes(
    router: APIRouter,
    *,
    views: CaseViews,
    who_is: Any,
    clock: Clock,
    submit: Callable[[Sequence[Outbox], Feedback], Awaitable[None]],
    outboxes: Sequence[Outbox],
    proofs: Proofs,
    responses: Responses,
    read_responses: Responses,
    read_security: dict[str, Any],
    write_security: dict[str, Any],
) -> None:
    """Add the action routes to ``router`` (the ``/api`` router, before the conversation's own route)."""
    unknown: Responses = {404: {"description": "unknown action", "content": _ERROR}}
    refused: Responses = {
        409: {"description": "the action is not open, has expired, or has other arguments", "content": _ERROR}
    }

    async def decide(
        action_id: str, body: Decision, who: Identity, verdict: Literal["approved", "rejected"]
    ) -> DecisionAccepted:
        record = await views.action(action_id, tenants=who.tenant_filter)
        if record is None or record.suggestion_id is None:
            raise HTTPException(404, "unknown action")
        why = refusal(
            record,
            approve=verdict == "approved",
            by=who.name,
            role=who.role,
            arguments_hash=body.arguments_hash,
            now=clock.now(),
        )
        if why is not None:
            raise HTTPException(_STATUS.get(why[0], 409), why[1])
        now = clock.now()
        decision = Feedback(
            type="feedback",
            schema_version=1,
            feedback_id=str(uuid.uuid4()),
            suggestion_id=record.suggestion_id,
            action_id=action_id,
            conversation_id=record.conversation_id,
            tenant=record.tenant,
            verdict=verdict,
            by=who.name,
            role=who.role,
            arguments_hash=body.arguments_hash,
            at=now,
            text=body.reason if verdict == "rejected" and body.reason else None,
        )
        event = proofs.signed(decision, action_id=action_id, now=now)  # the daemon believes what this signs
        await submit(outboxes, event)
        return DecisionAccepted(feedback_id=event.feedback_id, action_id=action_id)

    @router.post(
        "/actions/{action_id}/approve",
        status_code=202,
        responses={**responses, **unknown, **refused},
        openapi_extra=write_security,
    )
    async def approve(action_id: str, body: Decision, who: Identity = who_is) -> DecisionAccepted:
        """Approve the action with exactly the arguments shown: it runs once vigil takes the approval (at most once).
        Only the role the rule names approves an action held for approval; a declined or blocked action never runs."""
        return await decide(action_id, body, who, "approved")

    @router.post(
        "/actions/{action_id}/reject",
        status_code=202,
        responses={**responses, **unknown, **refused},
        openapi_extra=write_security,
    )
    async def reject(action_id: str, body: Decision, who: Identity = who_is) -> DecisionAccepted:
        """Reject the action: it will not run."""
        return await decide(action_id, body, who, "rejected")

    @router.get(
        "/conversations/{conversation_id:path}/audit",
        responses={**read_responses, 404: {"description": "unknown conversation", "content": _ERROR}},
        openapi_extra=read_security,
    )
    async def audit(conversation_id: str, who: Identity = who_is) -> list[AuditEntry]:
        """Every step of every action of the case, in the order it happened: suggested, declined or blocked,
        decided again, approved, resumed or rejected (by whom, in what role), refused, executing, in doubt, executed or
        failed, expired."""
        log = await views.audit(conversation_id, tenants=who.tenant_filter)
        if log is None:
            raise HTTPException(404, "unknown conversation")
        return log
