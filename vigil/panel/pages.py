"""The panel's pages: the queue, a conversation (and its Progress section alone), a knowledge source, the lead
overview and knowledge review; signing in and out.

Pages are server-rendered (Jinja, autoescaped); the queue and the conversation hand their data to
``static/panel.js`` as JSON and it renders and updates them live, building DOM nodes with ``textContent`` only, so
nothing a customer types can become markup.
The conversation's Progress section (``vigil/panel/progress.py``) is drawn here, and drawn again by
``/panel/progress/{id}`` when the case moves; the script only counts its clocks down.

Times follow the tenant's display (``vigil.panel.display``): ``<body data-locale data-time-zone>`` carries the page's (a
conversation's tenant's; elsewhere the person's first tenant's, or the default for a person of every tenant), and
the queue carries each visible tenant's as JSON, so each row is written as its tenant reads time.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import PureWindowsPath
from typing import Any
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from vigil.cases.views import CaseViews, ConversationView
from vigil.core.clock import Clock
from vigil.core.errors import AuthError, AuthUnavailable
from vigil.knowledge.store import MINED, KnowledgeStore
from vigil.panel import charts
from vigil.panel.actions_view import case_actions
from vigil.panel.auth import CSRF_FIELD, Authenticator
from vigil.panel.display import Display, Displays
from vigil.panel.goodwill import GoodwillBudgets, budget_lines
from vigil.panel.identity import Identity
from vigil.panel.markdown import render as render_markdown
from vigil.panel.oidc import OidcClient, PendingLogin
from vigil.panel.overview import overview
from vigil.panel.overview_charts import all_charts
from vigil.panel.progress import CaseProgress, progress_of
from vigil.panel.review import LIMIT, LISTS, Reviewed, reviewed, rival_ids
from vigil.panel.routes import visible_conversation
from vigil.panel.windows import WINDOWS, fitting, oldest_record
from vigil.wire.events import DRAFT_MARK

log = logging.getLogger(__name__)

TEMPLATES = Jinja2Templates(directory=str(resources.files("vigil.panel") / "templates"))
TEMPLATES.env.filters["seconds"] = charts.seconds
_MAX_FORM_BYTES = 8192


class SignIn(Exception):
    """The page needs a signed-in person: send the browser to the sign-in page."""

    def __init__(self, next_path: str) -> None:
        self.next_path = next_path


def page_routes(
    *,
    views: CaseViews,
    knowledge: KnowledgeStore | None,
    auth: Authenticator,
    oidc: OidcClient | None,
    clock: Clock,
    displays: Displays | None = None,
    budgets: GoodwillBudgets | None = None,
) -> APIRouter:
    """The HTML routes; ``budgets`` reads goodwill against the concession budget for the overview, when actions are
    on (``vigil.panel.goodwill``)."""
    router = APIRouter(include_in_schema=False)
    displays = displays or Displays()

    def render(request: Request, name: str, who: Identity | None, status: int = 200, **context: Any) -> HTMLResponse:
        if "display" not in context:
            context["display"] = displays.of_person(who.tenants) if who else displays.default
        context |= {"who": who, "csrf": auth.csrf_token(request), "auth_mode": auth.mode}
        return TEMPLATES.TemplateResponse(request, name, context, status_code=status)

    async def viewer(request: Request) -> Identity:
        who = await auth.identify(request)
        if who is None:
            raise SignIn(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
        return who

    @router.get("/")
    async def home() -> RedirectResponse:
        return RedirectResponse("/panel", status_code=303)

    @router.get("/panel")
    async def queue_page(request: Request) -> HTMLResponse:
        who = await viewer(request)
        items = await views.queue(tenants=who.tenant_filter, reader=who.name)
        data = [item.model_dump(mode="json") for item in items]
        shown = displays.as_json(who.tenant_filter)
        return render(request, "queue.html", who, queue=data, now=clock.now().isoformat(), displays=shown)

    @router.get("/panel/conversations/{conversation_id:path}")
    async def conversation_page(conversation_id: str, request: Request) -> HTMLResponse:
        who = await viewer(request)
        view = await visible_conversation(views, conversation_id, who)
        data = view.model_dump(mode="json")
        display: Display = displays.of(view.tenant)
        shown = await progress(view, who, display)
        return render(
            request,
            "conversation.html",
            who,
            view=view,
            data=data,
            draft_mark=DRAFT_MARK,
            display=display,
            progress=shown,
            actions=await case_actions(views, view, who, display, clock.now()),
        )

    @router.get("/panel/progress/{conversation_id:path}")
    async def progress_part(conversation_id: str, request: Request) -> HTMLResponse:
        """The conversation page's Progress section alone, for the page to draw again when the case moves."""
        who = await viewer(request)
        view = await visible_conversation(views, conversation_id, who, limit=1)
        display = displays.of(view.tenant)
        return render(request, "_progress.html", who, progress=await progress(view, who, display), display=display)

    @router.get("/panel/actions/{conversation_id:path}")
    async def actions_part(conversation_id: str, request: Request) -> HTMLResponse:
        """The conversation page's Actions section alone, for the page to draw again when an action moves."""
        who = await viewer(request)
        view = await visible_conversation(views, conversation_id, who, limit=1)
        display = displays.of(view.tenant)
        shown = await case_actions(views, view, who, display, clock.now())
        return render(request, "_actions.html", who, actions=shown, display=display)

    async def progress(view: ConversationView, who: Identity, display: Display) -> CaseProgress:
        brief = await views.handover(view.conversation_id, tenants=who.tenant_filter, zone=display.zone)
        return progress_of(view, brief, display, clock.now())

    @router.get("/panel/overview")
    async def overview_page(request: Request, window: str | None = None) -> HTMLResponse:
        who = await viewer(request)
        if not who.at_least("lead"):
            raise HTTPException(403, "the overview is for leads and admins")
        until = clock.now()
        chosen, fitted = WINDOWS.get(window or ""), ""
        if chosen is None:  # none asked for (or one we do not offer): the shortest that holds the data
            oldest = await oldest_record(views, who.tenant_filter, until)
            chosen = fitting(oldest, until)
            fitted = "the shortest window that holds all the data" if oldest else "nothing to count yet"
        report = await overview(
            views, tenants=who.tenant_filter, since=until - chosen.span, until=until, bucket_s=chosen.bucket_s
        )
        return render(
            request,
            "overview.html",
            who,
            report=report,
            window=chosen.name,
            fitted=fitted,
            windows=list(WINDOWS),
            charts=all_charts(report, display=displays.of_person(who.tenants)),
            goodwill=budget_lines(await budgets(who.tenant_filter), displays) if budgets is not None else None,
        )

    _knowledge_routes(router, render=render, viewer=viewer, knowledge=knowledge, displays=displays, clock=clock)
    _sign_in_routes(router, render=render, auth=auth, oidc=oidc)
    return router


def _knowledge_routes(
    router: APIRouter,
    *,
    render: Callable[..., HTMLResponse],
    viewer: Callable[[Request], Awaitable[Identity]],
    knowledge: KnowledgeStore | None,
    displays: Displays,
    clock: Clock,
) -> None:
    """A knowledge entry's page, and the leads' review of mined knowledge."""

    def display_of(tenant: str | None, who: Identity) -> Display:
        return displays.of(tenant) if tenant else displays.of_person(who.tenants)

    async def rivals_of(store: KnowledgeStore, rows: list[dict[str, Any]], who: Identity) -> dict[str, Reviewed]:
        """The entries that ``rows`` say disagree with them, those ``who`` may see, read for people."""
        named = rival_ids(rows)
        found = await store.governed(ids=named, tenants=who.tenant_filter) if named else []
        return {row["id"]: reviewed(row, display_of(row["tenant"], who), clock.now()) for row in found}

    @router.get("/panel/knowledge/{entry_id:path}")
    async def knowledge_page(entry_id: str, request: Request) -> HTMLResponse:
        who = await viewer(request)
        entry = await knowledge.entry(entry_id) if knowledge is not None else None
        if knowledge is None or entry is None or (entry.tenant is not None and not who.may_see(entry.tenant)):
            raise HTTPException(404, "unknown knowledge entry")  # another tenant's entry is not there for them
        link = entry.url if entry.url and entry.url.startswith(("https://", "http://", "/panel/")) else None
        governed = await knowledge.governed(ids=[entry_id])
        display = display_of(entry.tenant, who)
        rivals = await rivals_of(knowledge, governed, who)
        return render(
            request,
            "knowledge.html",
            who,
            entry=entry,
            link=link,
            body=render_markdown(entry.body),
            origin=origin_name(entry.origin),
            governance=reviewed(governed[0], display, clock.now(), rivals) if governed else None,
        )

    @router.get("/panel/review")
    async def review_page(request: Request, status: str = "pending_review") -> HTMLResponse:
        who = await viewer(request)
        if not who.at_least("lead"):
            raise HTTPException(403, "the knowledge review is for leads and admins")
        shown = LISTS.get(status)
        if shown is None:
            raise HTTPException(404, "no such list: pending_review, active or retired")
        rows = (
            await knowledge.governed(
                status=shown.status,
                origin=MINED if shown.mined_only else None,
                tenants=who.tenant_filter,
                limit=LIMIT + 1,
            )
            if knowledge is not None
            else []
        )
        rivals = await rivals_of(knowledge, rows[:LIMIT], who) if knowledge is not None else {}
        entries = [reviewed(row, display_of(row["tenant"], who), clock.now(), rivals) for row in rows[:LIMIT]]
        bodies = {e.id: render_markdown(e.body) for e in entries if e.kept is None}  # no case: its own text
        return render(
            request,
            "review.html",
            who,
            entries=entries,
            bodies=bodies,
            lists=LISTS,
            shown=shown,
            more=len(rows) > LIMIT,
            limit=LIMIT,
        )


def _sign_in_routes(
    router: APIRouter, *, render: Callable[..., HTMLResponse], auth: Authenticator, oidc: OidcClient | None
) -> None:
    @router.get("/login")
    async def login_page(request: Request, next: str = "/panel", signed_out: bool = False) -> Response:
        target = safe_next(next)
        if auth.mode == "none":
            return RedirectResponse(target, status_code=303)
        if auth.mode == "oidc" and not signed_out:  # straight to the provider, unless they just left
            return RedirectResponse(f"/auth/oidc/login?next={quote(target)}", status_code=303)
        return render(request, "login.html", None, next=target, error=None, signed_out=signed_out)

    @router.post("/login")
    async def login(request: Request) -> Response:
        form = await _form(request)
        target = safe_next(form.get("next", "/panel"))
        problem = auth.csrf_problem(request, form.get(CSRF_FIELD))
        if problem:
            return render(request, "login.html", None, status=403, next=target, error=f"Refused: {problem}.")
        user = auth.user_for_token(form.get("token", "").strip()) if auth.mode == "tokens" else None
        if user is None:
            return render(request, "login.html", None, status=401, next=target, error="That token is not valid.")
        await auth.sign_in(request, Identity(user.name, user.role, tuple(user.tenants)), via="token")
        return RedirectResponse(target, status_code=303)

    @router.post("/logout")
    async def logout(request: Request) -> Response:
        form = await _form(request)
        problem = auth.csrf_problem(request, form.get(CSRF_FIELD))
        if problem:
            raise HTTPException(403, problem)
        await auth.sign_out(request)
        return RedirectResponse("/login?signed_out=true" if auth.mode != "none" else "/panel", status_code=303)

    @router.get("/auth/oidc/login")
    async def oidc_login(request: Request, next: str = "/panel") -> Response:
        if oidc is None:
            raise HTTPException(404, "OIDC sign-in is not configured")
        try:
            started = await oidc.begin()
        except AuthError as exc:
            return render(request, "login.html", None, status=503, next=safe_next(next), error=str(exc))
        request.session["oidc"] = started.to_session() | {"next": safe_next(next)}
        return RedirectResponse(started.url, status_code=303)

    @router.get("/auth/oidc/callback")
    async def oidc_callback(request: Request) -> Response:
        if oidc is None:
            raise HTTPException(404, "OIDC sign-in is not configured")
        pending = request.session.pop("oidc", None)
        target = safe_next(pending.get("next", "/panel") if isinstance(pending, dict) else "/panel")
        q = request.query_params
        try:
            who = await oidc.finish(
                PendingLogin.from_session(pending),
                code=q.get("code"),
                state=q.get("state"),
                error=q.get("error"),
                iss=q.get("iss"),
            )
        except AuthUnavailable as exc:
            return render(request, "login.html", None, status=503, next=target, error=str(exc))
        except AuthError as exc:
            log.info("OIDC sign-in refused: %s", exc)
            return render(request, "login.html", None, status=403, next=target, error=str(exc))
        await auth.sign_in(request, who, via="oidc")
        return RedirectResponse(target, status_code=303)


def origin_name(origin: str) -> str:
    """Where an entry came from, for people: a file's name without the server's folders; a mined case's id as is."""
    # Windows paths split on either slash, so one parser serves a path from any server.
    return PureWindowsPath(origin).name if "/" in origin or "\\" in origin else origin


def safe_next(target: str) -> str:
    """Where to go after signing in: a path on this site only (never another host)."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target or any(ord(c) < 32 for c in target):
        return "/panel"
    return target


async def _form(request: Request) -> dict[str, str]:
    """A small url-encoded form (sign-in, sign-out); anything else is refused."""
    if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        raise HTTPException(415, "send a form")
    body = await request.body()
    if len(body) > _MAX_FORM_BYTES:
        raise HTTPException(413, "form too large")
    return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
