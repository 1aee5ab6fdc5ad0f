"""The panel's JSON API (also for scripts, with a bearer token): queue, conversations, feedback, live updates.

Everything is scoped to the caller's tenants: another tenant's conversation or suggestion is "not found".
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import AwareDatetime, BaseModel, Field

from vigil import paging
from vigil.clock import Clock
from vigil.errors import InvalidCursor, StoreError, TransportError
from vigil.events import Feedback
from vigil.live import LiveFeed
from vigil.panel.auth import Authenticator
from vigil.panel.identity import Identity
from vigil.settings import PanelRole
from vigil.store import CaseStore, ConversationSummary, ConversationView, QueueItem
from vigil.transport import Outbox

log = logging.getLogger(__name__)

_UNAVAILABLE: dict[int | str, dict[str, Any]] = {503: {"description": "the case store or the broker is unavailable"}}
_SUBMIT_TIMEOUT_S = 5.0
LIVE_RECHECK_S = 5.0


class FeedbackRequest(BaseModel):
    """An analyst's verdict on a suggestion, as the panel sends it."""

    verdict: Literal["accepted", "edited", "dismissed"]
    text: Annotated[str, Field(max_length=16_000)] | None = Field(
        default=None, description="For edited: the reply as sent. For dismissed: the reason, if given."
    )


class ReadRequest(BaseModel):
    """How far the analyst has read a conversation."""

    through: AwareDatetime = Field(
        description="When the newest suggestion the analyst was shown was made (its created_at); a time still to "
        "come counts as now."
    )


class RevokeRequest(BaseModel):
    """Whose sessions to end."""

    user: str = Field(min_length=1, max_length=256, description="The name they sign in as (as /api/whoami shows it).")


class Revoked(BaseModel):
    """The person's browser sessions have ended, on every replica."""

    user: str
    sessions: int = Field(description="How many sessions ended.")


class FeedbackAccepted(BaseModel):
    """The feedback event is on the input stream; vigil stores it as it consumes it."""

    feedback_id: str


class Caller:
    """Dependencies that resolve who is calling: 401 when nobody is signed in, 403 below the needed role."""

    def __init__(self, auth: Authenticator) -> None:
        self.auth = auth

    async def __call__(self, request: Request) -> Identity:
        identity = await self.auth.identify(request)
        if identity is None:
            raise HTTPException(401, "sign in first", headers={"WWW-Authenticate": 'Bearer realm="vigil"'})
        return identity

    def with_role(self, role: PanelRole) -> Callable[[Request], Awaitable[Identity]]:
        """A dependency: the caller, if their role is ``role`` or above."""

        async def dependency(request: Request) -> Identity:
            identity = await self(request)
            if not identity.at_least(role):
                raise HTTPException(403, f"this needs the {role} role")
            return identity

        return dependency

    async def guard(self, request: Request) -> None:
        """A dependency for state-changing routes: refuse the anonymous (401), then what fails the CSRF checks."""
        await self(request)
        problem = self.auth.csrf_problem(request, None)
        if problem:
            raise HTTPException(403, problem)


def api_routes(
    *, store: CaseStore, feed: LiveFeed, outboxes: Sequence[Outbox], caller: Caller, clock: Clock
) -> APIRouter:
    """The ``/api`` routes."""
    router = APIRouter(prefix="/api", tags=["panel"])
    who_is = Depends(caller)
    admin = Depends(caller.with_role("admin"))

    @router.get("/whoami")
    async def whoami(who: Identity = who_is) -> dict[str, object]:
        """The signed-in caller."""
        return {"name": who.name, "role": who.role, "tenants": list(who.tenants)}

    @router.get("/queue", responses=_UNAVAILABLE)
    async def queue(who: Identity = who_is, limit: Annotated[int, Query(ge=1, le=500)] = 200) -> list[QueueItem]:
        """Open conversations of the caller's tenants, those waiting longest first."""
        return await store.queue(tenants=who.tenant_filter, reader=who.name, limit=limit)

    @router.get("/conversations", responses=_UNAVAILABLE)
    async def conversations(
        who: Identity = who_is, limit: Annotated[int, Query(ge=1, le=500)] = 50
    ) -> list[ConversationSummary]:
        """The most recently active conversations of the caller's tenants, newest first."""
        return await store.recent_conversations(limit, tenants=who.tenant_filter)

    @router.get(
        "/conversations/{conversation_id:path}",
        responses={404: {"description": "unknown conversation"}, 422: {"description": "a bad cursor"}, **_UNAVAILABLE},
    )
    async def conversation(
        conversation_id: str,
        who: Identity = who_is,
        limit: Annotated[int, Query(ge=1, le=paging.MAX_PAGE)] = paging.DEFAULT_PAGE,
        before: Annotated[str | None, Query(max_length=2048, description="the `older` cursor of a page")] = None,
    ) -> ConversationView:
        """A page of a conversation: its state, its newest ``limit`` messages and suggestions (newest first), the
        verdicts on those suggestions, and ``older``, the cursor that fetches the page before (null at the start)."""
        return await visible_conversation(store, conversation_id, who, limit=limit, before=before)

    @router.post(
        "/conversations/{conversation_id:path}/read",
        status_code=204,
        dependencies=[Depends(caller.guard)],
        responses={404: {"description": "unknown conversation"}, **_UNAVAILABLE},
    )
    async def read(conversation_id: str, body: ReadRequest, who: Identity = who_is) -> None:
        """The caller has read the conversation through a suggestion they were shown: it and those before it are no
        longer unread in their queue (a suggestion made meanwhile, not yet shown, stays unread)."""
        through = min(body.through, clock.now())
        if not await store.mark_read(who.name, conversation_id, through, tenants=who.tenant_filter):
            raise HTTPException(404, "unknown conversation")

    @router.post(
        "/suggestions/{suggestion_id}/feedback",
        status_code=202,
        dependencies=[Depends(caller.guard)],
        responses={404: {"description": "unknown suggestion"}, **_UNAVAILABLE},
    )
    async def feedback(suggestion_id: str, body: FeedbackRequest, who: Identity = who_is) -> FeedbackAccepted:
        """Accept, edit or dismiss a suggestion: a ``feedback`` event goes onto the input stream."""
        suggestion = await store.suggestion(suggestion_id)
        if suggestion is None or not who.may_see(suggestion.tenant):
            raise HTTPException(404, "unknown suggestion")
        if body.verdict == "edited" and not (body.text or "").strip():
            raise HTTPException(422, "an edited suggestion needs the text as sent")
        event = Feedback(
            type="feedback",
            schema_version=1,
            feedback_id=str(uuid.uuid4()),
            suggestion_id=suggestion.suggestion_id,
            conversation_id=suggestion.conversation_id,
            tenant=suggestion.tenant,
            verdict=body.verdict,
            by=who.name,
            at=clock.now(),
            text=(body.text or None) if body.text and body.text.strip() else None,
        )
        await _submit(outboxes, event)
        return FeedbackAccepted(feedback_id=event.feedback_id)

    @router.post(
        "/sessions/revoke",
        dependencies=[Depends(caller.guard)],
        responses={403: {"description": "not an admin of every tenant, or the CSRF checks failed"}, **_UNAVAILABLE},
    )
    async def revoke_sessions(body: RevokeRequest, who: Identity = admin) -> Revoked:
        """Sign a person out of every browser on every replica (admins only). Their bearer token, if they have one,
        stays valid: remove them from ``VIGIL_PANEL__USERS`` to take it away. A person's sessions span their tenants,
        so only an admin of every tenant may end them."""
        if who.tenant_filter is not None:
            raise HTTPException(403, "only an admin of every tenant may sign people out")
        ended = await caller.auth.sessions.end_all(body.user)
        log.info("%s revoked %d panel sessions of %s", who.name, ended, body.user)
        return Revoked(user=body.user, sessions=ended)

    @router.get("/live", response_class=EventSourceResponse)
    async def live(
        request: Request, who: Identity = who_is, conversation: str | None = None
    ) -> AsyncIterator[ServerSentEvent]:
        """Server-sent events: ``message``, ``case``, ``suggestion`` and ``feedback`` updates as they happen. The
        stream ends, before the next update, once the caller's sign-in has (checked at most every few seconds)."""
        with feed.watch(tenants=who.tenant_filter, conversation_id=conversation) as watcher:
            yield ServerSentEvent(event="hello", data={"watching": conversation})
            checked = clock.monotonic()
            async for update in watcher:
                if clock.monotonic() - checked >= LIVE_RECHECK_S:
                    if not await _still_signed_in(caller.auth, request):
                        return
                    checked = clock.monotonic()
                yield ServerSentEvent(event=update.kind, raw_data=update.json)

    return router


async def visible_conversation(
    store: CaseStore,
    conversation_id: str,
    who: Identity,
    *,
    limit: int = paging.DEFAULT_PAGE,
    before: str | None = None,
) -> ConversationView:
    """A page of the conversation if the caller may see it; 404 otherwise (another tenant's looks like none at all),
    422 for a cursor that no page gave."""
    try:
        view = await store.conversation(conversation_id, tenants=who.tenant_filter, limit=limit, before=before)
    except InvalidCursor as exc:
        raise HTTPException(422, str(exc)) from exc
    if view is None:
        raise HTTPException(404, "unknown conversation")
    return view


async def _still_signed_in(auth: Authenticator, request: Request) -> bool:
    try:
        return await auth.identify(request) is not None
    except StoreError:  # cannot tell: end the stream; the browser comes back, and is let in only if it may
        return False


async def _submit(outboxes: Sequence[Outbox], event: Feedback) -> None:
    if not outboxes:
        raise HTTPException(503, "no stream to put feedback on")
    value = event.model_dump_json(exclude_none=True).encode()
    try:
        async with asyncio.timeout(_SUBMIT_TIMEOUT_S):
            await outboxes[0].submit(value, tenant=event.tenant or "", conversation_id=event.conversation_id)
    except (TransportError, TimeoutError) as exc:
        raise HTTPException(503, "the broker did not take the feedback; try again") from exc
