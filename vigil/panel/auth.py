"""Who may use the panel: bearer tokens, signed session cookies, OIDC sign-ins, roles, tenants and CSRF.

An API client sends ``Authorization: Bearer TOKEN``; a browser signs in once (with its token, or through the
OIDC provider) and then carries a signed, HttpOnly session cookie naming a session kept in the database
(``sessions.py``): a sign-out or an admin's revocation ends it on every replica. Tokens are never stored: the settings
hold their SHA-256. An OIDC session lasts ``VIGIL_PANEL__OIDC__SESSION_MAX_AGE_S`` at most, as its role and tenants
are the provider's at sign-in; a token user's are read from the settings on every request. Every state-changing
request made with the cookie must carry the session's CSRF token (header ``X-CSRF-Token`` or form field
``csrf_token``) and, when the browser sends one, a same-origin ``Origin``.
With ``VIGIL_PANEL__AUTH=none`` (allowed on a loopback host only) everyone is a local admin, CSRF still applies to
browsers; a request that names another host (a DNS-rebinding page reaching the loopback port) is nobody. A local
script (no cookie, no ``Origin``, no ``Sec-Fetch-Site``: not a browser, which sends ``Origin`` on every cross-origin
POST and ``Sec-Fetch-*`` on every request) is exempt from CSRF there, as it carries no ambient credential to abuse.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import TYPE_CHECKING, Any

from vigil.panel.identity import ALL_TENANTS, Identity
from vigil.panel.settings import PanelSettings, PanelUser, is_loopback

if TYPE_CHECKING:  # annotations only: `vigil token` uses this module and needs neither Starlette nor the database
    from starlette.requests import Request

    from vigil.panel.sessions import SessionRegistry

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

    def __init__(self, settings: PanelSettings, *, sessions: SessionRegistry) -> None:
        self.settings = settings
        self.sessions = sessions
        self._by_digest = {u.token_sha256: u for u in settings.users}
        self._by_name = {u.name: u for u in settings.users}

    @property
    def mode(self) -> str:
        """``none``, ``tokens`` or ``oidc``."""
        return self.settings.auth

    async def identify(self, request: Request) -> Identity | None:
        """The person behind ``request``: by bearer token, then by session; None if nobody is signed in.

        Raises:
            StoreError: the sessions cannot be read (nobody is let in on a cookie alone).
        """
        scheme, _, credential = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and credential:
            user = self.user_for_token(credential.strip())
            return _identity(user) if user else None
        if self.mode == "none":
            return LOCAL if is_loopback(request.url.hostname or "") else None
        who: dict[str, Any] | None = request.session.get("who")
        if not who:
            return None
        identity = self._session_identity(who)
        session_id = request.session.get("sid")
        if (
            identity is None
            or not isinstance(session_id, str)
            or not await self.sessions.is_live(session_id, identity.name)
        ):
            request.session.clear()  # signed out, revoked or expired: the browser drops the cookie
            return None
        return identity

    def _session_identity(self, who: dict[str, Any]) -> Identity | None:
        if who.get("via") == "token":  # re-read the settings: a removed user is signed out at once
            user = self._by_name.get(who.get("name", ""))
            return _identity(user) if user else None
        if who.get("via") == "oidc" and self.mode == "oidc" and ALL_TENANTS not in who["tenants"]:
            return Identity(name=who["name"], role=who["role"], tenants=tuple(who["tenants"]))
        return None

    def user_for_token(self, token: str) -> PanelUser | None:
        """The user whose token this is, or None."""
        return self._by_digest.get(token_digest(token))  # a digest: timing reveals nothing about a token

    @staticmethod
    def is_bearer(request: Request) -> bool:
        """Whether the request authenticates itself (no ambient cookie, so no CSRF risk)."""
        return request.headers.get("authorization", "").lower().startswith("bearer ")

    async def sign_in(self, request: Request, identity: Identity, *, via: str) -> None:
        """Start a session for ``identity`` (a fresh CSRF token; any earlier session in this browser ends)."""
        max_age_s = self.settings.session_max_age_s
        if via == "oidc":
            max_age_s = min(max_age_s, self.settings.oidc.session_max_age_s)
        session_id = await self.sessions.open(identity.name, via=via, max_age_s=max_age_s)
        await self.sign_out(request)
        request.session["who"] = {
            "name": identity.name,
            "role": identity.role,
            "tenants": list(identity.tenants),
            "via": via,
        }
        request.session["sid"] = session_id
        request.session["csrf"] = secrets.token_urlsafe(24)

    async def sign_out(self, request: Request) -> None:
        """End the session: in the database, so that a copy of the cookie is refused on every replica too."""
        session_id = request.session.get("sid")
        if isinstance(session_id, str):
            await self.sessions.end(session_id)
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
        if request.method in SAFE_METHODS or self.is_bearer(request) or self._local_script(request):
            return None
        origin = request.headers.get("origin")
        if origin is not None and origin != _own_origin(request):
            return "cross-origin request"
        expected = request.session.get("csrf")
        given = request.headers.get(CSRF_HEADER) or submitted
        if not expected or not given or not hmac.compare_digest(str(expected), given):
            return "missing or wrong CSRF token"
        return None

    def _local_script(self, request: Request) -> bool:
        """A request to the no-auth loopback panel that no browser made: it names a loopback host (the DNS-rebinding
        check), carries no cookie, and none of the headers a browser adds to a request a page makes."""
        headers = request.headers
        return (
            self.mode == "none"
            and is_loopback(request.url.hostname or "")
            and not any(name in headers for name in ("cookie", "origin", "sec-fetch-site", "referer"))
        )


def _identity(user: PanelUser) -> Identity:
    return Identity(name=user.name, role=user.role, tenants=tuple(user.tenants))


def _own_origin(request: Request) -> str:
    url = request.url
    default = {"http": 80, "https": 443}.get(url.scheme)
    port = f":{url.port}" if url.port and url.port != default else ""
    host = f"[{url.hostname}]" if url.hostname and ":" in url.hostname else url.hostname  # IPv6, as in an Origin
    return f"{url.scheme}://{host}{port}"
