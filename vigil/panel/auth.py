"""Who may use the panel: bearer tokens, signed session cookies, OIDC sign-ins, roles, tenants and CSRF.

An API client sends ``Authorization: Bearer TOKEN``; a browser signs in once (with its token, or through the
OIDC provider) and then carries a signed, HttpOnly session cookie. Tokens are never stored: the settings hold
their SHA-256. Every state-changing request made with the cookie must carry the session's CSRF token (header
``X-CSRF-Token`` or form field ``csrf_token``) and, when the browser sends one, a same-origin ``Origin``.
With ``VIGIL_PANEL__AUTH=none`` (allowed on a loopback host only) everyone is a local admin, CSRF still applies;
a request that names another host (a DNS-rebinding page reaching the loopback port) is nobody.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

from starlette.requests import Request

from vigil.panel.identity import Identity
from vigil.settings import PanelSettings, PanelUser, is_loopback

CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
LOCAL = Identity(name="local", role="admin", tenants=("*",))
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def token_digest(token: str) -> str:
    """The SHA-256 (hex) of a token, as ``VIGIL_PANEL__USERS`` stores it."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


class Authenticator:
    """Identifies the person behind a request and guards state-changing requests."""

    def __init__(self, settings: PanelSettings) -> None:
        self.settings = settings
        self._by_digest = {u.token_sha256: u for u in settings.users}
        self._by_name = {u.name: u for u in settings.users}

    @property
    def mode(self) -> str:
        """``none``, ``tokens`` or ``oidc``."""
        return self.settings.auth

    def identify(self, request: Request) -> Identity | None:
        """The person behind ``request``: by bearer token, then by session; None if nobody is signed in."""
        scheme, _, credential = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and credential:
            user = self.user_for_token(credential.strip())
            return _identity(user) if user else None
        if self.mode == "none":
            return LOCAL if is_loopback(request.url.hostname or "") else None
        who: dict[str, Any] | None = request.session.get("who")
        if not who:
            return None
        if who.get("via") == "token":  # re-read the settings: a removed user is signed out at once
            user = self._by_name.get(who.get("name", ""))
            return _identity(user) if user else None
        if who.get("via") == "oidc" and self.mode == "oidc":
            return Identity(name=who["name"], role=who["role"], tenants=tuple(who["tenants"]))
        return None

    def user_for_token(self, token: str) -> PanelUser | None:
        """The user whose token this is, or None."""
        return self._by_digest.get(token_digest(token))  # a digest: timing reveals nothing about a token

    @staticmethod
    def is_bearer(request: Request) -> bool:
        """Whether the request authenticates itself (no ambient cookie, so no CSRF risk)."""
        return request.headers.get("authorization", "").lower().startswith("bearer ")

    @staticmethod
    def sign_in(request: Request, identity: Identity, *, via: str) -> None:
        """Start a session for ``identity`` (a fresh CSRF token; any earlier session state is dropped)."""
        request.session.clear()
        request.session["who"] = {
            "name": identity.name,
            "role": identity.role,
            "tenants": list(identity.tenants),
            "via": via,
        }
        request.session["csrf"] = secrets.token_urlsafe(24)

    @staticmethod
    def sign_out(request: Request) -> None:
        """End the session."""
        request.session.clear()

    @staticmethod
    def csrf_token(request: Request) -> str:
        """The session's CSRF token, made on first use."""
        token = request.session.get("csrf")
        if not token:
            token = secrets.token_urlsafe(24)
            request.session["csrf"] = token
        return str(token)

    def csrf_problem(self, request: Request, submitted: str | None) -> str | None:
        """Why a state-changing request must be refused, or None if it may go ahead."""
        if request.method in SAFE_METHODS or self.is_bearer(request):
            return None
        origin = request.headers.get("origin")
        if origin is not None and origin != _own_origin(request):
            return "cross-origin request"
        expected = request.session.get("csrf")
        given = request.headers.get(CSRF_HEADER) or submitted
        if not expected or not given or not hmac.compare_digest(str(expected), given):
            return "missing or wrong CSRF token"
        return None


def _identity(user: PanelUser) -> Identity:
    return Identity(name=user.name, role=user.role, tenants=tuple(user.tenants))


def _own_origin(request: Request) -> str:
    url = request.url
    default = {"http": 80, "https": 443}.get(url.scheme)
    port = f":{url.port}" if url.port and url.port != default else ""
    host = f"[{url.hostname}]" if url.hostname and ":" in url.hostname else url.hostname  # IPv6, as in an Origin
    return f"{url.scheme}://{host}{port}"
