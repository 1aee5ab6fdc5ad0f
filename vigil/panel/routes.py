"""The panel's JSON API (also for scripts, with a bearer token): queue, conversations, feedback, live updates, and
the leads' review of knowledge (approve, retire).

Everything is scoped to the caller's tenants: another tenant's conversation, suggestion or knowledge entry is "not
found".
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import AfterValidator, BaseModel, Field, model_validator

from vigil.cases import paging
from vigil.cases.handover import Brief
from vigil.cases.views import CaseViews, ConversationSummary, ConversationView, QueueItem
from vigil.core.clock import Clock
from vigil.core.errors import InvalidCursor, StoreError, TransportError
from vigil.flow.feed import LiveFeed
from vigil.knowledge.store import KnowledgeStore
from vigil.panel.actions import action_routes
from vigil.panel.auth import CSRF_HEADER, SAFE_METHODS, Authenticator
from vigil.panel.identity import Identity
from vigil.panel.settings import PanelRole
from vigil.transport.base import Outbox
from vigil.wire.events import Feedback, Timestamp
from vigil.wire.proof import Proofs

log = logging.getLogger(__name__)

Responses = dict[int | str, dict[str, Any]]
_ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
_UNAVAILABLE: Responses = {503: {"description": "the case store or the broker is unavailable", "content": _ERROR}}
# Every /api route: who may call it, and the refusals it can answer with (FastAPI adds 422 where it validates).
_SIGNED_IN: Responses = {401: {"description": "nobody is signed in (no valid token or session)", "content": _ERROR}}
_UNREADABLE: Responses = {400: {"description": "a body that cannot be read as JSON text", "content": _ERROR}}
_ADMIN: Responses = {
    **_SIGNED_IN,
    **_UNREADABLE,
    403: {"description": "not an admin of every tenant, or the CSRF checks failed", "content": _ERROR},
}
_LEAD: Responses = {
    **_SIGNED_IN,
    403: {
        "description": "not a lead or admin; a global entry, and not of every tenant; or the CSRF checks failed",
        "content": _ERROR,
    },
}
_GUARDED: Responses = {
    **_SIGNED_IN,
    **_UNREADABLE,
    403: {"description": "a session request without its CSRF token, or from another origin", "content": _ERROR},
}
# The security schemes the app's OpenAPI declares (see ``openapi_components``): a bearer token, or the session
# cookie, which on state-changing requests needs its CSRF token in a header as well.
_READ_SECURITY: dict[str, Any] = {"security": [{"bearer": []}, {"session": []}]}
_WRITE_SECURITY: dict[str, Any] = {"security": [{"bearer": []}, {"session": [], "csrf": []}]}
_SUBMIT_TIMEOUT_S = 5.0
LIVE_RECHECK_S = 5.0


class FeedbackRequest(BaseModel):
    """An analyst's verdict on a suggestion, as the panel sends it."""

    verdict: Literal["accepted", "edited", "dismissed"]
    text: Annotated[str, Field(max_length=16_000)] | None = Field(
        default=None, description="For edited: the reply as sent (required). For dismissed: the reason, if given."
    )

    @model_validator(mode="after")
    def _edited_has_text(self) -> FeedbackRequest:
        # Here, not in the route: a 422 then has the validation-error shape the OpenAPI documents.
        if self.verdict == "edited" and not (self.text or "").strip():
            raise ValueError("an edited suggestion needs the text as sent")
        return self


def _in_utc(value: datetime) -> datetime:
    # A valid date-time can still fall outside the years a datetime holds once put in UTC (0001-01-01T00:00+00:01).
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{value.isoformat()} is before year 1 or after year 9999 in UTC") from None


class ReadRequest(BaseModel):
    """How far the analyst has read a conversation."""

    through: Annotated[Timestamp, AfterValidator(_in_utc)] = Field(
        description="When the newest suggestion the analyst was shown was made (its created_at), an RFC 3339 "
        "date-time with its zone; a time still to come counts as now."
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


class Governed(BaseModel):
    """A knowledge entry's status after a lead's decision: ``active`` is served, ``retired`` is not."""

    entry_id: str
    status: Literal["active", "retired"]


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
        """For state-changing requests: refuse the anonymous (401), then what fails the CSRF checks (403)."""
        await self(request)
        problem = self.auth.csrf_problem(request, None)
        if problem:
            raise HTTPException(403, problem)

    def route_class(self) -> type[APIRoute]:
        """A route class that guards every state-changing request before FastAPI reads and validates its body: a
        request that fails the CSRF checks learns nothing about what a valid body looks like."""
        guard = self.guard

        class GuardedRoute(APIRoute):
            def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
                handle = super().get_route_handler()

                async def guarded(request: Request) -> Response:
                    if request.method not in SAFE_METHODS:
                        await guard(request)
                    return await handle(request)

                return guarded

        return GuardedRoute


def api_routes(
    *,
    views: CaseViews,
    feed: LiveFeed,
    outboxes: Sequence[Outbox],
    proofs: Proofs,
    caller: Caller,
    clock: Clock,
    knowledge: KnowledgeStore | None = None,
) -> APIRouter:
    """The ``/api`` routes."""
    router = APIRouter(prefix="/api", tags=["panel"], route_class=caller.route_class())
    who_is = Depends(caller)
    admin = Depends(caller.with_role("admin"))
    lead = Depends(caller.with_role("lead"))
    unknown_conversation: Responses = {404: {"description": "unknown conversation", "content": _ERROR}}

    @router.get("/whoami", responses=_SIGNED_IN, openapi_extra=_READ_SECURITY)
    async def whoami(who: Identity = who_is) -> dict[str, object]:
        """The signed-in caller."""
        return {"name": who.name, "role": who.role, "tenants": list(who.tenants)}

    @router.get("/queue", responses={**_SIGNED_IN, **_UNAVAILABLE}, openapi_extra=_READ_SECURITY)
    async def queue(who: Identity = who_is, limit: Annotated[int, Query(ge=1, le=500)] = 200) -> list[QueueItem]:
        """Open conversations of the caller's tenants, those waiting longest first."""
        return await views.queue(tenants=who.tenant_filter, reader=who.name, limit=limit)

    @router.get("/conversations", responses={**_SIGNED_IN, **_UNAVAILABLE}, openapi_extra=_READ_SECURITY)
    async def conversations(
        who: Identity = who_is, limit: Annotated[int, Query(ge=1, le=500)] = 50
    ) -> list[ConversationSummary]:
        """The most recently active conversations of the caller's tenants, newest first."""
        return await views.recent_conversations(limit, tenants=who.tenant_filter)

    # Before the GET of a conversation, whose path also matches ``.../read``: an OPTIONS or a GET there is then
    # answered with the methods of both routes (see ``vigil.app.http``), not of the GET alone.
    @router.post(
        "/conversations/{conversation_id:path}/read",
        status_code=204,
        responses={**_GUARDED, **unknown_conversation, **_UNAVAILABLE},
        openapi_extra=_WRITE_SECURITY,
    )
    async def read(conversation_id: str, body: ReadRequest, who: Identity = who_is) -> None:
        """The caller has read the conversation through a suggestion they were shown: it and those before it are no
        longer unread in their queue (a suggestion made meanwhile, not yet shown, stays unread)."""
        through = min(body.through, clock.now())
        if not await views.mark_read(who.name, conversation_id, through, tenants=who.tenant_filter):
            raise HTTPException(404, "unknown conversation")

    # Before the conversation's own route: its path converter would take ".../handover" as part of the id.
    _handover_route(router, views, who_is, unknown_conversation)
    action_routes(
        router,
        views=views,
        who_is=who_is,
        clock=clock,
        submit=_submit,
        outboxes=outboxes,
        proofs=proofs,
        responses={**_GUARDED, **_UNAVAILABLE},
        read_responses={**_SIGNED_IN, **_UNAVAILABLE},
        read_security=_READ_SECURITY,
        write_security=_WRITE_SECURITY,
    )

    @router.get(
        "/conversations/{conversation_id:path}",
        responses={**_SIGNED_IN, **unknown_conversation, **_UNAVAILABLE},
        openapi_extra=_READ_SECURITY,
    )
    async def conversation(
        conversation_id: str,
        who: Identity = who_is,
        limit: Annotated[int, Query(ge=1, le=paging.MAX_PAGE)] = paging.DEFAULT_PAGE,
        before: Annotated[str | None, Query(max_length=2048, description="the `older` cursor of a page")] = None,
    ) -> ConversationView:
        """A page of a conversation: its state, its newest ``limit`` messages and suggestions (newest first), the
        verdicts on those suggestions, and ``older``, the cursor that fetches the page before (null at the start).
        A cursor that no page gave is a 422."""
        return await visible_conversation(views, conversation_id, who, limit=limit, before=before)

    @router.post(
        "/suggestions/{suggestion_id}/feedback",
        status_code=202,
        responses={**_GUARDED, 404: {"description": "unknown suggestion", "content": _ERROR}, **_UNAVAILABLE},
        openapi_extra=_WRITE_SECURITY,
    )
    async def feedback(suggestion_id: str, body: FeedbackRequest, who: Identity = who_is) -> FeedbackAccepted:
        """Accept, edit or dismiss a suggestion: a ``feedback`` event goes onto the input stream."""
        suggestion = await views.suggestion(suggestion_id)
        if suggestion is None or not who.may_see(suggestion.tenant):
            raise HTTPException(404, "unknown suggestion")
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

    @router.post("/sessions/revoke", responses={**_ADMIN, **_UNAVAILABLE}, openapi_extra=_WRITE_SECURITY)
    async def revoke_sessions(body: RevokeRequest, who: Identity = admin) -> Revoked:
        """Sign a person out of every browser on every replica (admins only). Their bearer token, if they have one,
        stays valid: remove them from ``VIGIL_PANEL__USERS`` to take it away. A person's sessions span their tenants,
        so only an admin of every tenant may end them."""
        if who.tenant_filter is not None:
            raise HTTPException(403, "only an admin of every tenant may sign people out")
        ended = await caller.auth.sessions.end_all(body.user)
        log.info("%s revoked %d panel sessions of %s", who.name, ended, body.user)
        return Revoked(user=body.user, sessions=ended)

    governing: Responses = {
        **_LEAD,
        404: {"description": "unknown knowledge entry", "content": _ERROR},
        503: {"description": "the knowledge store is unavailable", "content": _ERROR},
    }

    @router.post("/knowledge/{entry_id:path}/approve", responses=governing, openapi_extra=_WRITE_SECURITY)
    async def approve(entry_id: str, who: Identity = lead) -> Governed:
        """Serve a knowledge entry that waits for review, or was retired (leads and admins). A mined entry whose cases
        disagree stays served until a new disagreeing case or entry comes (the miner keeps a lead's decision)."""
        return await _govern(knowledge, entry_id, "active", who)

    @router.post("/knowledge/{entry_id:path}/retire", responses=governing, openapi_extra=_WRITE_SECURITY)
    async def retire(entry_id: str, who: Identity = lead) -> Governed:
        """Stop serving a knowledge entry (leads and admins); it is kept, with its provenance, and the miner leaves
        it retired."""
        return await _govern(knowledge, entry_id, "retired", who)

    @router.get("/live", response_class=EventSourceResponse, responses=_SIGNED_IN, openapi_extra=_READ_SECURITY)
    async def live(
        request: Request, who: Identity = who_is, conversation: str | None = None
    ) -> AsyncIterator[ServerSentEvent]:
        """Server-sent events: ``message``, ``case``, ``suggestion`` and ``feedback`` updates as they happen. The
        stream ends, before the next update, once the caller's sign-in has (checked at most every few seconds)."""
        with feed.watch(tenants=who.tenant_filter, conversation_id=conversation) as subscriber:
            yield ServerSentEvent(event="hello", data={"watching": conversation})
            checked = clock.monotonic()
            async for update in subscriber:
                if clock.monotonic() - checked >= LIVE_RECHECK_S:
                    if not await _still_signed_in(caller.auth, request):
                        return
                    checked = clock.monotonic()
                yield ServerSentEvent(event=update.kind, raw_data=update.json)

    return router


def openapi_components(schema: dict[str, Any]) -> dict[str, Any]:
    """Adds what the routes' OpenAPI refers to: the security schemes and the shape of an error that is not a
    validation error (``{"detail": "why"}``)."""
    components = schema.setdefault("components", {})
    components.setdefault("securitySchemes", {}).update(
        {
            "bearer": {"type": "http", "scheme": "bearer", "description": "a token from `vigil token`"},
            "session": {"type": "apiKey", "in": "cookie", "name": "vigil_session", "description": "a panel sign-in"},
            "csrf": {
                "type": "apiKey",
                "in": "header",
                "name": CSRF_HEADER,
                "description": "the session's CSRF token, on every state-changing request made with the cookie",
            },
        }
    )
    components.setdefault("schemas", {})["Error"] = {
        "type": "object",
        "properties": {"detail": {"type": "string"}},
        "required": ["detail"],
        "title": "Error",
    }
    return schema


def _handover_route(router: APIRouter, views: CaseViews, who_is: Any, unknown_conversation: Responses) -> None:
    """``GET /api/conversations/{id}/handover``."""

    @router.get(
        "/conversations/{conversation_id:path}/handover",
        responses={**_SIGNED_IN, **unknown_conversation, **_UNAVAILABLE},
        openapi_extra=_READ_SECURITY,
    )
    async def handover(
        conversation_id: str,
        who: Identity = who_is,
        tz: Annotated[str | None, Query(max_length=64, description="IANA time zone for the text's times")] = None,
    ) -> Brief:
        """The case's handover brief: the problem, what has been tried, the open promises with their due times, the
        customer's sentiment, the next step and the SLA clocks; as JSON, and as ``text`` for a person."""
        zone = _zone(tz)
        brief = await views.handover(conversation_id, tenants=who.tenant_filter, zone=zone)
        if brief is None:
            raise HTTPException(404, "unknown conversation")
        return brief


def _zone(name: str | None) -> ZoneInfo | None:
    """The time zone a query names; a 422 in the shape of the others for one that does not exist."""
    if name is None:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        error = {"type": "value_error", "loc": ("query", "tz"), "msg": f"{name!r} is not a time zone", "input": name}
        raise RequestValidationError([error]) from exc


async def visible_conversation(
    views: CaseViews,
    conversation_id: str,
    who: Identity,
    *,
    limit: int = paging.DEFAULT_PAGE,
    before: str | None = None,
) -> ConversationView:
    """A page of the conversation if the caller may see it; 404 otherwise (another tenant's looks like none at all),
    422 for a cursor that no page gave."""
    try:
        view = await views.conversation(conversation_id, tenants=who.tenant_filter, limit=limit, before=before)
    except InvalidCursor as exc:  # in the shape of every other 422 (the OpenAPI's HTTPValidationError)
        error = {"type": "value_error", "loc": ("query", "before"), "msg": str(exc), "input": before}
        raise RequestValidationError([error]) from exc
    if view is None:
        raise HTTPException(404, "unknown conversation")
    return view


async def _govern(
    knowledge: KnowledgeStore | None, entry_id: str, status: Literal["active", "retired"], who: Identity
) -> Governed:
    """Set the status of an entry the caller may see: 404 for another tenant's (as for none at all); 403 for a
    global entry, which is every tenant's, unless the caller is of every tenant."""
    found = await knowledge.governed(ids=[entry_id]) if knowledge is not None else []
    tenant = found[0]["tenant"] if found else None
    if knowledge is None or not found or (tenant is not None and not who.may_see(tenant)):
        raise HTTPException(404, "unknown knowledge entry")
    if tenant is None and who.tenant_filter is not None:
        raise HTTPException(403, "a global entry is every tenant's: only a lead or admin of every tenant may change it")
    if not await knowledge.govern(entry_id, status=status):  # removed meanwhile
        raise HTTPException(404, "unknown knowledge entry")
    log.info("%s set knowledge entry %s to %s", who.name, entry_id, status, extra={"entry_id": entry_id})
    return Governed(entry_id=entry_id, status=status)


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
