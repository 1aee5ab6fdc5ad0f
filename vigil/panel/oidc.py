"""Panel sign-in through an OpenID Connect provider: the authorization code flow with PKCE (S256).

    client = OidcClient(settings.panel.oidc, clock=clock)
    await client.start()                       # never fails for a provider that is down: see below
    login = await client.begin()               # keep login.to_session() in the session; redirect to login.url
    ...                                        # the provider sends the browser back to the callback
    pending = PendingLogin.from_session(session.pop("oidc"))
    identity = await client.finish(pending, code=..., state=..., error=..., iss=...)
    await client.close()

The provider's discovery document and keys are read by ``start`` when it can reach the provider; when it cannot, each
sign-in tries again until they are read, so the daemon starts while the provider is down. The keys are read again when
an ID token names a key vigil does not know (the provider rotated its keys) or when they are an hour old.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import logging
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from vigil.core.clock import Clock
from vigil.core.errors import AuthError, AuthUnavailable, SettingsError
from vigil.panel.id_token import KEY_TYPES, identity_from_claims, public_key, signed_with, verify
from vigil.panel.identity import Identity
from vigil.panel.settings import OidcSettings

log = logging.getLogger(__name__)

DISCOVERY_PATH = "/.well-known/openid-configuration"
LOGIN_MAX_AGE_S = 600.0
KEYS_MAX_AGE_S = 3600.0


@dataclass(frozen=True, slots=True)
class PendingLogin:
    """What ``finish`` needs from ``begin``: kept in the signed session cookie between the two requests."""

    state: str
    nonce: str
    code_verifier: str
    started_at: float  # seconds since the epoch

    def to_session(self) -> dict[str, str | float]:
        """The login as JSON-friendly values for the session."""
        return {
            "state": self.state,
            "nonce": self.nonce,
            "code_verifier": self.code_verifier,
            "started_at": self.started_at,
        }

    @classmethod
    def from_session(cls, data: object) -> PendingLogin:
        """The login ``to_session`` stored; ``AuthError`` if the session holds none (expired, or another browser)."""
        keys = ("state", "nonce", "code_verifier", "started_at")
        values = [data.get(k) for k in keys] if isinstance(data, Mapping) else []
        match values:
            case [str(state), str(nonce), str(verifier), int() | float() as started_at] if state and nonce and verifier:
                return PendingLogin(state, nonce, verifier, float(started_at))
        raise AuthError("this browser has no sign-in in progress; please sign in again")


@dataclass(frozen=True, slots=True)
class Login(PendingLogin):
    """A sign-in begun: send the browser to ``url`` and keep the rest (``to_session``) for ``finish``."""

    url: str


@dataclass(frozen=True, slots=True)
class _Provider:
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    auth_methods: tuple[str, ...]


class OidcClient:
    """A relying party of one OpenID Connect provider, turning a sign-in there into an ``Identity``.

    Args:
        settings: the provider and how its claims map to names, tenants and roles.
        clock: the time ID tokens and logins are checked against.
        http: a client to reuse (not closed by ``close``); by default one of its own.
    """

    def __init__(self, settings: OidcSettings, *, clock: Clock, http: httpx.AsyncClient | None = None) -> None:
        for name in ("issuer", "client_id", "redirect_url"):
            if not getattr(settings, name):
                raise SettingsError(f"VIGIL_PANEL__OIDC__{name.upper()}", "is not set")
        self._settings = settings
        self._issuer: str = settings.issuer  # type: ignore[assignment]  # checked above
        self._client_id: str = settings.client_id  # type: ignore[assignment]
        self._clock = clock
        self._http = http or httpx.AsyncClient(timeout=settings.timeout_s)
        self._owns_http = http is None
        self._provider: _Provider | None = None
        self._keys: dict[str, dict[str, Any]] = {}
        self._keys_read_at = 0.0
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """Read the provider's discovery document and keys if it can be reached; otherwise the first sign-in will."""
        try:
            await self._ready()
        except AuthError as exc:
            log.warning("OIDC provider %s not ready (sign-in will try again): %s", self._issuer, exc)

    async def close(self) -> None:
        """Close the HTTP client, if it is this client's own."""
        if self._owns_http:
            await self._http.aclose()

    async def begin(self) -> Login:
        """Start a sign-in: fresh state, nonce and PKCE verifier, and the provider's URL to send the browser to.

        Raises:
            AuthUnavailable: the provider cannot be reached (nor could it before).
            AuthError: the provider's discovery document does not fit the settings.
        """
        provider = await self._ready()
        verifier = secrets.token_urlsafe(48)
        login = PendingLogin(secrets.token_urlsafe(24), secrets.token_urlsafe(24), verifier, self._now())
        params = {
            "response_type": "code",
            "client_id": self._client_id,
            "redirect_uri": self._settings.redirect_url,
            "scope": self._settings.scopes,
            "state": login.state,
            "nonce": login.nonce,
            "code_challenge": _b64(hashlib.sha256(verifier.encode()).digest()),
            "code_challenge_method": "S256",
        }
        url = httpx.URL(provider.authorization_endpoint).copy_merge_params(params)
        return Login(login.state, login.nonce, login.code_verifier, login.started_at, str(url))

    async def finish(
        self,
        pending: PendingLogin,
        *,
        code: str | None,
        state: str | None,
        error: str | None = None,
        iss: str | None = None,
    ) -> Identity:
        """Complete a sign-in from the callback's query parameters and say who signed in.

        Args:
            pending: what ``begin`` returned, as kept in the session.
            code, state, error, iss: the callback's query parameters of those names (None where absent).

        Raises:
            AuthError: the sign-in was refused, does not belong to this browser, or its ID token is not valid.
            AuthUnavailable: the provider cannot be reached.
        """
        code = self._check_callback(pending, code=code, state=state, error=error, iss=iss)
        provider = await self._ready()
        id_token = await self._redeem(provider, code, pending.code_verifier)
        claims = await self._verify(provider, id_token, pending.nonce)
        return identity_from_claims(claims, self._settings)

    def _check_callback(
        self, pending: PendingLogin, *, code: str | None, state: str | None, error: str | None, iss: str | None
    ) -> str:
        if error:
            raise AuthError(f"the sign-in provider refused the sign-in ({_code(error)})")
        if not state or not hmac.compare_digest(state.encode(), pending.state.encode()):
            raise AuthError("this sign-in was not started in this browser; please sign in again")
        if iss is not None and iss != self._issuer:
            raise AuthError("the sign-in came back from another provider")
        if self._now() - pending.started_at > LOGIN_MAX_AGE_S:
            raise AuthError("the sign-in took too long; please sign in again")
        if not code:
            raise AuthError("the sign-in provider sent no authorization code")
        return code

    def _now(self) -> float:
        return self._clock.now().timestamp()

    async def _ready(self) -> _Provider:
        if self._provider is None:
            async with self._lock:
                if self._provider is None:
                    await self._discover()
        assert self._provider is not None
        return self._provider

    async def _discover(self) -> None:
        doc = await self._get_json(self._issuer.rstrip("/") + DISCOVERY_PATH, "discovery")
        if doc.get("issuer") != self._issuer:
            raise AuthError(f"the sign-in provider calls itself {doc.get('issuer')!r}, not {self._issuer!r}")
        methods = doc.get("token_endpoint_auth_methods_supported", ["client_secret_basic"])
        provider = _Provider(
            authorization_endpoint=_url(doc, "authorization_endpoint"),
            token_endpoint=_url(doc, "token_endpoint"),
            jwks_uri=_url(doc, "jwks_uri"),
            auth_methods=tuple(m for m in methods if isinstance(m, str)) if isinstance(methods, list) else (),
        )
        await self._read_keys(provider.jwks_uri)
        self._provider = provider

    async def _read_keys(self, jwks_uri: str) -> None:
        jwks = await self._get_json(jwks_uri, "keys")
        keys = jwks.get("keys")
        if not isinstance(keys, list):
            raise AuthUnavailable("the sign-in provider's key set has no keys")
        usable = [k for k in keys if isinstance(k, dict) and k.get("use", "sig") == "sig"]
        self._keys = {str(k.get("kid", "")): k for k in usable if k.get("kty") in KEY_TYPES.values()}
        self._keys_read_at = self._clock.monotonic()
        log.debug("read %d signing keys of OIDC provider %s", len(self._keys), self._issuer)

    async def _get_json(self, url: str, what: str) -> dict[str, Any]:
        try:
            response = await self._http.get(
                url, headers={"Accept": "application/json"}, timeout=self._settings.timeout_s
            )
        except httpx.HTTPError as exc:
            raise AuthUnavailable(f"the sign-in provider cannot be reached ({what}: {type(exc).__name__})") from exc
        if response.status_code != 200:
            raise AuthUnavailable(f"the sign-in provider answered {response.status_code} ({what})")
        return _json_object(response, what)

    async def _redeem(self, provider: _Provider, code: str, verifier: str) -> str:
        form = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier}
        form["redirect_uri"] = str(self._settings.redirect_url)
        headers = {"Accept": "application/json"} | self._client_auth(provider, form)
        try:
            response = await self._http.post(
                provider.token_endpoint, data=form, headers=headers, timeout=self._settings.timeout_s
            )
        except httpx.HTTPError as exc:
            raise AuthUnavailable(f"the sign-in provider cannot be reached (token: {type(exc).__name__})") from exc
        if response.status_code in (400, 401):
            raise AuthError(f"the sign-in provider refused the sign-in ({_oauth_error(response)})")
        if response.status_code != 200:
            raise AuthUnavailable(f"the sign-in provider answered {response.status_code} (token)")
        id_token = _json_object(response, "token").get("id_token")
        if not isinstance(id_token, str):
            raise AuthError("the sign-in provider sent no ID token")
        return id_token

    def _client_auth(self, provider: _Provider, form: dict[str, str]) -> dict[str, str]:
        """Authenticate to the token endpoint as the provider prefers: adds to ``form``, returns headers."""
        secret = self._settings.client_secret
        if secret is None:  # a public client: PKCE alone binds the code to this sign-in
            form["client_id"] = self._client_id
            return {}
        if "client_secret_basic" in provider.auth_methods or not provider.auth_methods:
            pair = f"{quote(self._client_id, safe='')}:{quote(secret.get_secret_value(), safe='')}"
            return {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}
        if "client_secret_post" in provider.auth_methods:
            form |= {"client_id": self._client_id, "client_secret": secret.get_secret_value()}
            return {}
        raise AuthError("the sign-in provider accepts neither client_secret_basic nor client_secret_post")

    async def _verify(self, provider: _Provider, id_token: str, nonce: str) -> dict[str, Any]:
        alg, kid = signed_with(id_token)
        key = public_key(await self._published_key(provider, kid), alg)
        return verify(id_token, key, issuer=self._issuer, client_id=self._client_id, nonce=nonce, now=self._now())

    async def _published_key(self, provider: _Provider, kid: str | None) -> dict[str, Any] | None:
        """The provider's key named ``kid``, reading the keys again if it is unknown (rotation) or they are old."""
        jwk = self._find_key(kid)
        if jwk is None or self._clock.monotonic() - self._keys_read_at > KEYS_MAX_AGE_S:
            async with self._lock:
                await self._read_keys(provider.jwks_uri)
            jwk = self._find_key(kid)
        return jwk

    def _find_key(self, kid: str | None) -> dict[str, Any] | None:
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return self._keys.get(kid) if kid is not None else None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _url(doc: Mapping[str, Any], name: str) -> str:
    value = doc.get(name)
    if not isinstance(value, str) or not value.startswith(("https://", "http://")):
        raise AuthError(f"the sign-in provider's discovery document has no {name}")
    return value


def _json_object(response: httpx.Response, what: str) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError as exc:
        raise AuthUnavailable(f"the sign-in provider answered something other than JSON ({what})") from exc
    if not isinstance(body, dict):
        raise AuthUnavailable(f"the sign-in provider answered something other than a JSON object ({what})")
    return body


def _oauth_error(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    return _code(error) if isinstance(error, str) else f"HTTP {response.status_code}"


def _code(error: str) -> str:
    """An OAuth error code fit to show: the provider's (or a forged callback's) text cut to code characters."""
    return re.sub(r"[^A-Za-z0-9_.-]", "", error)[:64] or "unknown error"
