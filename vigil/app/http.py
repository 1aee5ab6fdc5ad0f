"""The HTTP app on the daemon's one port: health, readiness and metrics, and the routers the capabilities give (the
JSON API and the analyst panel), with the error pages, the session cookies and the security headers."""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import quote

import uvicorn
from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vigil import __version__
from vigil.app.health import Health
from vigil.core.errors import KnowledgeError, StoreError
from vigil.core.metrics import Metrics
from vigil.panel.pages import TEMPLATES, SignIn
from vigil.panel.routes import openapi_components
from vigil.panel.sessions import SessionCookies
from vigil.panel.settings import PanelSettings

log = logging.getLogger(__name__)

SESSION_COOKIE = "vigil_session"
# The panel loads nothing from elsewhere and runs no inline script or style.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
SECURITY_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
)


def create_app(
    *,
    health: Health,
    metrics: Metrics,
    routers: Sequence[APIRouter] = (),
    panel: PanelSettings | None = None,
) -> FastAPI:
    """The FastAPI application, mounting ``routers``; the daemon serves it with uvicorn inside its own event loop.

    ``panel`` sets the session cookies (secret, lifetime, ``Secure``).
    """
    panel = panel or PanelSettings()
    app = FastAPI(title="vigil", version=__version__, docs_url="/docs", redoc_url=None)
    _operations(app, health, metrics)
    for router in routers:
        app.include_router(router)
    _error_pages(app, [route for router in routers for route in router.routes])
    _openapi_components(app)
    secret = panel.session_secret.get_secret_value() if panel.session_secret else secrets.token_urlsafe(32)
    app.add_middleware(
        SessionCookies,
        always_secure=panel.secure_cookies,
        secret_key=secret,
        session_cookie=SESSION_COOKIE,
        max_age=int(panel.session_max_age_s),
        same_site="lax",
    )
    app.add_middleware(SecurityHeaders)
    return app


def _operations(app: FastAPI, health: Health, metrics: Metrics) -> None:
    @app.get("/healthz", tags=["operations"])
    async def healthz() -> dict[str, str]:
        """Alive: the process answers."""
        return {"status": "alive"}

    @app.get("/readyz", tags=["operations"], responses={503: {"description": "a dependency is unreachable"}})
    async def readyz() -> JSONResponse:
        """Ready: 200 only while every check passed its last run: the brokers, the consumer group (joined, holding
        its partitions), the database, the knowledge store (with answers on) and the pipeline (running, not still
        starting); else 503 naming the problems."""
        if health.ready:
            return JSONResponse({"status": "ready"})
        return JSONResponse({"status": "unavailable", "problems": health.problems}, status_code=503)

    @app.get("/metrics", tags=["operations"], response_class=Response)
    async def prometheus_metrics() -> Response:
        """Prometheus metrics in the text exposition format."""
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)


def _openapi_components(app: FastAPI) -> None:
    """The routes' OpenAPI refers to security schemes and an error shape declared once for the document."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        first = app.openapi_schema is None
        schema = generate()  # cached by FastAPI: completed once
        return openapi_components(schema) if first else schema

    app.openapi = openapi  # type: ignore[method-assign]


def _allowed_methods(request: Request, routes: Sequence[BaseRoute]) -> str | None:
    """Every method one of ``routes`` takes at this path (None if none matches it). The router names only the first
    route whose path matches, and a conversation's GET (its id may hold slashes) also matches ``.../read``."""
    methods: set[str] = set()
    for route in routes:
        if isinstance(route, Route) and route.methods and route.matches(request.scope)[0] != Match.NONE:
            methods |= route.methods
    return ", ".join(sorted(methods)) if methods else None


def _wants_page(request: Request) -> bool:
    """Whether an error is answered with a page: on the panel's paths, unless the client asks for JSON alone (the
    panel's scripts, a script of its own); elsewhere (the API, probes, unknown paths), only for a browser."""
    accept = request.headers.get("accept", "")
    if request.url.path.startswith("/api"):
        return False
    if request.url.path.startswith("/panel"):
        return "text/html" in accept or "application/json" not in accept
    return "text/html" in accept


def _error_pages(app: FastAPI, routes: Sequence[BaseRoute]) -> None:
    """Browsers get pages (and a sign-in redirect); API clients get JSON. Starlette's HTTPException, the base of
    FastAPI's, so that unknown paths and methods get the same treatment; a database (or Chroma) that fails is a 503
    anywhere."""

    @app.exception_handler(SignIn)
    async def sign_in(request: Request, exc: SignIn) -> Response:
        return RedirectResponse(f"/login?next={quote(exc.next_path)}", status_code=303)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        """A body that cannot be read as JSON is a 400, as the API documents; what JSON fails to validate, a 422."""
        unreadable = next((e for e in exc.errors() if e.get("type") == "json_invalid"), None)
        if unreadable is not None:
            why = unreadable.get("ctx", {}).get("error") or unreadable.get("msg") or "invalid JSON"
            return JSONResponse({"detail": f"the body is not JSON text: {why}"}, status_code=400)
        return await request_validation_exception_handler(request, exc)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        allowed = _allowed_methods(request, routes) if exc.status_code == 405 else None
        if allowed:
            exc.headers = {**(exc.headers or {}), "Allow": allowed}
        if not _wants_page(request):
            return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)
        context: dict[str, Any] = {"status": exc.status_code, "detail": exc.detail, "who": None, "csrf": ""}
        return TEMPLATES.TemplateResponse(request, "error.html", context, status_code=exc.status_code)

    @app.exception_handler(StoreError)
    async def store_error(request: Request, exc: StoreError) -> Response:
        log.warning("%s %s: %s", request.method, request.url.path, exc)
        return await http_error(request, HTTPException(503, "the case store is unavailable"))

    @app.exception_handler(KnowledgeError)
    async def knowledge_error(request: Request, exc: KnowledgeError) -> Response:
        log.warning("%s %s: %s", request.method, request.url.path, exc)
        return await http_error(request, HTTPException(503, "the knowledge store is unavailable"))


class SecurityHeaders:
    """Adds the security headers to every response, and the content security policy to every page. What the panel
    and the API answer is never cached (customer text; and a page brought back from a cache would show a stale
    queue), except the panel's static files."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith("/docs"):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [*SECURITY_HEADERS, (b"content-security-policy", CSP.encode())]
                if not scope["path"].startswith("/panel/static/") and not any(
                    k == b"cache-control" for k, _ in headers
                ):
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


class EmbeddedServer(uvicorn.Server):
    """uvicorn inside the daemon's loop: the daemon owns the signals, so uvicorn must not install its own."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
