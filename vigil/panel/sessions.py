"""The panel's browser sessions: a signed cookie that names a session, and the sessions kept in the database.

A sign-in makes a random session id. The cookie (signed with ``VIGIL_PANEL__SESSION_SECRET``) carries it; the
``panel_session`` table keeps its SHA-256, who signed in and when the session ends. Every request made with the
cookie checks that row, so a sign-out (the row goes), an admin's revocation of all of a person's sessions, and the
expiry hold at once on every replica that shares the database, whatever copies of the cookie are still around.

The cookie is HttpOnly and SameSite=Lax, and Secure when ``VIGIL_PANEL__SECURE_COOKIES`` is set or the request came
over HTTPS (behind a proxy that terminates TLS: when uvicorn trusts its ``X-Forwarded-Proto``).
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from starlette.middleware.sessions import SessionMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from vigil.cases.views import CaseViews
from vigil.core.clock import Clock
from vigil.panel.tables import PANEL_SESSION


class SessionRegistry:
    """The live panel sessions, in the case store's database (shared by every replica)."""

    def __init__(self, views: CaseViews, *, clock: Clock) -> None:
        self._views = views
        self._clock = clock

    async def open(self, name: str, *, via: str, max_age_s: float) -> str:
        """Start a session for ``name`` lasting ``max_age_s``; its id, for the cookie. Ended sessions are pruned."""
        session_id = secrets.token_urlsafe(32)
        now = self._clock.now()
        row = {
            "id_sha256": _digest(session_id),
            "name": name,
            "via": via,
            "signed_in_at": now,
            "expires_at": now + timedelta(seconds=max_age_s),
        }
        async with self._views.writing() as conn:
            await conn.execute(sa.delete(PANEL_SESSION).where(PANEL_SESSION.c.expires_at <= now))
            await conn.execute(sa.insert(PANEL_SESSION).values(row))
        return session_id

    async def is_live(self, session_id: str, name: str) -> bool:
        """Whether the session ``session_id`` of ``name`` has neither ended nor expired."""
        c = PANEL_SESSION.c
        async with self._views.reading() as conn:
            expires = await conn.scalar(
                sa.select(c.expires_at).where(c.id_sha256 == _digest(session_id), c.name == name)
            )
        return expires is not None and expires > self._clock.now()

    async def end(self, session_id: str) -> None:
        """End one session (signing out)."""
        async with self._views.writing() as conn:
            await conn.execute(sa.delete(PANEL_SESSION).where(PANEL_SESSION.c.id_sha256 == _digest(session_id)))

    async def end_all(self, name: str) -> int:
        """End every session of ``name``, in every browser; how many there were (expired ones not yet pruned too)."""
        async with self._views.writing() as conn:
            ended = await conn.execute(sa.delete(PANEL_SESSION).where(PANEL_SESSION.c.name == name))
        return int(ended.rowcount or 0)


class SessionCookies:
    """Starlette's signed session cookie, marked Secure when the settings say so or the request came over HTTPS.

    Args:
        always_secure: mark the cookie Secure on every request (``VIGIL_PANEL__SECURE_COOKIES``).
        options: for ``SessionMiddleware`` (secret, cookie name, max age, SameSite).
    """

    def __init__(self, app: ASGIApp, /, *, always_secure: bool, **options: Any) -> None:
        self._secure = SessionMiddleware(app, https_only=True, **options)
        self._plain = self._secure if always_secure else SessionMiddleware(app, https_only=False, **options)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        secure = scope.get("scheme") in ("https", "wss")
        await (self._secure if secure else self._plain)(scope, receive, send)


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()
