"""The HTTP API on the daemon's one port: health, readiness, metrics and the conversation API."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Annotated

import uvicorn
from fastapi import FastAPI, HTTPException, Query, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from vigil import __version__
from vigil.errors import StoreError
from vigil.health import Health
from vigil.metrics import Metrics
from vigil.store import CaseStore, ConversationSummary, ConversationView


def create_app(*, store: CaseStore, health: Health, metrics: Metrics) -> FastAPI:
    """The FastAPI application; the daemon serves it with uvicorn inside its own event loop."""
    app = FastAPI(title="vigil", version=__version__, docs_url="/docs", redoc_url=None)

    @app.get("/healthz", tags=["operations"])
    async def healthz() -> dict[str, str]:
        """Alive: the process answers."""
        return {"status": "alive"}

    @app.get("/readyz", tags=["operations"], responses={503: {"description": "a dependency is unreachable"}})
    async def readyz() -> JSONResponse:
        """Ready: 200 only while the broker and the database answered their last check."""
        if health.ready:
            return JSONResponse({"status": "ready"})
        return JSONResponse({"status": "unavailable", "problems": health.problems}, status_code=503)

    @app.get("/metrics", tags=["operations"], response_class=Response)
    async def prometheus_metrics() -> Response:
        """Prometheus metrics in the text exposition format."""
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/api/conversations", tags=["conversations"], responses={503: {"description": "database unavailable"}})
    async def conversations(limit: Annotated[int, Query(ge=1, le=500)] = 50) -> list[ConversationSummary]:
        """The most recently active conversations, newest first."""
        try:
            return await store.recent_conversations(limit)
        except StoreError as exc:
            raise HTTPException(status_code=503, detail="the case store is unavailable") from exc

    @app.get(
        "/api/conversations/{conversation_id:path}",
        tags=["conversations"],
        responses={404: {"description": "unknown conversation"}, 503: {"description": "database unavailable"}},
    )
    async def conversation(conversation_id: str) -> ConversationView:
        """A conversation: its state, messages in order and vigil's suggestions."""
        try:
            view = await store.conversation(conversation_id)
        except StoreError as exc:
            raise HTTPException(status_code=503, detail="the case store is unavailable") from exc
        if view is None:
            raise HTTPException(status_code=404, detail="unknown conversation")
        return view

    return app


class EmbeddedServer(uvicorn.Server):
    """uvicorn inside the daemon's loop: the daemon owns the signals, so uvicorn must not install its own."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
