"""A real OpenID Connect provider for tests, on 127.0.0.1: discovery, keys, ``/authorize`` and ``/token``.

    async with OidcProvider(redirect_uri="http://127.0.0.1:8080/auth/oidc/callback") as provider:
        provider.user = {"sub": "u-7", "email": "ana@example.com", "tenant": "acme", "vigil_role": "lead"}
        settings = provider.settings(redirect_url=...)   # OidcSettings pointing at it

``/authorize`` signs ``user`` in without asking and redirects (302) to the redirect URI with ``code``, ``state`` and
``iss`` (or ``error=`` when ``deny`` is set), so a headless browser can sign in through it. ``/token`` checks the
client's authentication (only the methods in ``auth_methods``), the code (single use), the redirect URI and the PKCE
verifier, and answers an ID token signed with ``signing_key``. Everything else a test may want to break is a public
attribute: see ``OidcProvider.__init__``. The provider can be stopped and started again on the same port.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import itertools
import json
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import httpx
import jwt
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from pydantic import SecretStr

from vigil.dev.broker import free_port
from vigil.panel.settings import OidcSettings

CLIENT_ID = "vigil-panel"
CLIENT_SECRET = "provider-secret"
ENDPOINTS = ("discovery", "jwks", "authorize", "token")
PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


@dataclass(frozen=True)
class SigningKey:
    """A private key the provider signs ID tokens with; ``jwk`` is its public half as published."""

    kid: str
    alg: str
    private: PrivateKey

    @classmethod
    def new(cls, alg: str = "RS256", *, unlike: Iterable[SigningKey] = ()) -> SigningKey:
        """A key with a fresh kid, its private key from a pool but never one of ``unlike``'s."""
        return cls(f"{alg.lower()}-{secrets.token_hex(4)}", alg, _private_key(alg, [k.private for k in unlike]))

    @property
    def jwk(self) -> dict[str, Any]:
        if isinstance(self.private, ec.EllipticCurvePrivateKey):
            public = ECAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        else:
            public = RSAAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        return public | {"kid": self.kid, "alg": self.alg, "use": "sig"}

    @property
    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def sign(self, claims: dict[str, Any], header: dict[str, Any]) -> str:
        return jwt.encode(claims, self.private, algorithm=self.alg, headers={"kid": self.kid} | header)


@dataclass
class Grant:
    """What an authorization code stands for."""

    client_id: str
    redirect_uri: str
    nonce: str | None
    challenge: str | None
    method: str | None
    user: dict[str, Any]


@dataclass
class TokenRequest:
    """One call of ``/token``, for assertions: the form and how the client authenticated."""

    form: dict[str, str]
    auth_method: str | None
    status: int = 0


@dataclass
class OidcProvider:
    """The provider. Attributes a test may set (all take effect at once, also while running):

    - ``user``: the claims of whoever signs in at ``/authorize`` (``sub`` plus anything, e.g. email, tenant, role).
    - ``id_token_claims``: merged last into the ID token's claims; a ``None`` value removes that claim
      (``{"aud": "other"}``, ``{"exp": provider.now() - 3600}``, ``{"nonce": None}``).
    - ``id_token_header``: merged into the ID token's JOSE header (``{"kid": "ghost"}``).
    - ``forge``: sign the ID token wrongly: ``"none"`` (alg none), ``"hs256"`` (HMAC keyed with the public key's PEM),
      ``"bad-signature"`` (a signature by another key under ``signing_key``'s kid).
    - ``signing_key`` / ``published``: the key that signs and the keys ``/jwks`` lists; ``rotate()`` changes both.
    - ``discovery_issuer``: the issuer the discovery document claims (default: the real one).
    - ``auth_methods``: token endpoint client authentication accepted and advertised; ``("none",)`` for a public
      client (then ``client_secret`` is None).
    - ``deny``: an OAuth error code ``/authorize`` answers with instead of a code (``"access_denied"``).
    - ``token_status``: answer ``/token`` with this HTTP status (e.g. 503) instead of working.
    - ``hang``: names of endpoints (``ENDPOINTS``) that never answer until the provider stops.

    Records: ``token_requests`` (each ``/token`` call) and ``reads`` (calls per endpoint).
    """

    redirect_uri: str | None = None  # None: any redirect URI is accepted
    client_id: str = CLIENT_ID
    client_secret: str | None = CLIENT_SECRET
    auth_methods: tuple[str, ...] = ("client_secret_basic", "client_secret_post")
    port: int = field(default_factory=free_port)
    user: dict[str, Any] = field(
        default_factory=lambda: {"sub": "u-1", "email": "ana@example.com", "tenant": "acme", "vigil_role": "lead"}
    )
    id_token_claims: dict[str, Any] = field(default_factory=dict)
    id_token_header: dict[str, Any] = field(default_factory=dict)
    forge: str | None = None
    signing_key: SigningKey = field(default_factory=SigningKey.new)
    published: list[SigningKey] = field(default_factory=list)
    discovery_issuer: str | None = None
    deny: str | None = None
    token_status: int | None = None
    hang: set[str] = field(default_factory=set)
    token_requests: list[TokenRequest] = field(default_factory=list)
    reads: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ENDPOINTS, 0))

    def __post_init__(self) -> None:
        self.published = self.published or [self.signing_key]
        self._grants: dict[str, Grant] = {}
        self._runner: web.AppRunner | None = None
        self._stopping = asyncio.Event()

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def now(self) -> int:
        """The provider's clock (the machine's), as ID-token times."""
        return int(time.time())

    def settings(self, *, redirect_url: str | None = None, **values: Any) -> OidcSettings:
        """Settings for a client of this provider (``values`` override any setting)."""
        defaults = {
            "issuer": self.issuer,
            "client_id": self.client_id,
            "client_secret": SecretStr(self.client_secret) if self.client_secret else None,
            "redirect_url": redirect_url or self.redirect_uri or "http://127.0.0.1:1/auth/oidc/callback",
        }
        return OidcSettings.model_validate(defaults | values)

    def rotate(self, alg: str = "RS256", *, keep_old: bool = True) -> SigningKey:
        """Sign with a new key from now on and publish it (with the old ones, unless ``keep_old`` is false)."""
        self.signing_key = SigningKey.new(alg, unlike=self.published)
        self.published = [*self.published, self.signing_key] if keep_old else [self.signing_key]
        return self.signing_key

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/.well-known/openid-configuration", self._discovery)
        app.router.add_get("/jwks", self._jwks)
        app.router.add_get("/authorize", self._authorize)
        app.router.add_post("/token", self._token)
        self._stopping = asyncio.Event()
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> OidcProvider:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _enter(self, endpoint: str) -> None:
        self.reads[endpoint] += 1
        if endpoint in self.hang:
            await self._stopping.wait()

    async def _discovery(self, request: web.Request) -> web.Response:
        await self._enter("discovery")
        return web.json_response(
            {
                "issuer": self.discovery_issuer or self.issuer,
                "authorization_endpoint": f"{self.issuer}/authorize",
                "token_endpoint": f"{self.issuer}/token",
                "jwks_uri": f"{self.issuer}/jwks",
                "response_types_supported": ["code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256", "ES256"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": list(self.auth_methods),
                "authorization_response_iss_parameter_supported": True,
            }
        )

    async def _jwks(self, request: web.Request) -> web.Response:
        await self._enter("jwks")
        return web.json_response({"keys": [key.jwk for key in self.published]})

    async def _authorize(self, request: web.Request) -> web.Response:
        await self._enter("authorize")
        query = request.query
        redirect_uri = query.get("redirect_uri", "")
        if query.get("client_id") != self.client_id or (self.redirect_uri and redirect_uri != self.redirect_uri):
            return web.Response(status=400, text="unknown client or redirect_uri")
        answer = {"state": query.get("state", ""), "iss": self.issuer}
        if self.deny or query.get("response_type") != "code" or "code_challenge" not in query:
            answer["error"] = self.deny or "invalid_request"
        else:
            answer["code"] = code = secrets.token_urlsafe(16)
            self._grants[code] = Grant(
                self.client_id,
                redirect_uri,
                query.get("nonce"),
                query.get("code_challenge"),
                query.get("code_challenge_method"),
                dict(self.user),
            )
        location = httpx.URL(redirect_uri).copy_merge_params({k: v for k, v in answer.items() if v})
        raise web.HTTPFound(str(location))

    async def _token(self, request: web.Request) -> web.Response:
        await self._enter("token")
        form = {k: v for k, v in (await request.post()).items() if isinstance(v, str)}
        call = TokenRequest(form, self._client_auth(request.headers.get("Authorization"), form))
        self.token_requests.append(call)
        body, call.status = self._answer(call)
        return web.json_response(body, status=call.status)

    def _answer(self, call: TokenRequest) -> tuple[dict[str, Any], int]:
        if self.token_status is not None:
            return {"error": "temporarily_unavailable"}, self.token_status
        if call.auth_method is None:
            return {"error": "invalid_client"}, 401
        form = call.form
        grant = self._grants.pop(form.get("code", ""), None)
        if form.get("grant_type") != "authorization_code" or grant is None:
            return {"error": "invalid_grant", "error_description": "unknown or used code"}, 400
        if form.get("redirect_uri") != grant.redirect_uri:
            return {"error": "invalid_grant", "error_description": "redirect_uri differs"}, 400
        if not _pkce_holds(grant, form.get("code_verifier")):
            return {"error": "invalid_grant", "error_description": "PKCE verification failed"}, 400
        return {
            "access_token": secrets.token_urlsafe(16),
            "token_type": "Bearer",
            "id_token": self.id_token(grant),
        }, 200

    def _client_auth(self, authorization: str | None, form: dict[str, str]) -> str | None:
        """How the client authenticated, or None if it did not (as this provider requires)."""
        if authorization and authorization.startswith("Basic "):
            user, _, password = base64.b64decode(authorization[6:]).decode().partition(":")
            ok = (unquote(user), unquote(password)) == (self.client_id, self.client_secret)
            return "client_secret_basic" if ok and "client_secret_basic" in self.auth_methods else None
        if "client_secret" in form:
            ok = (form.get("client_id"), form["client_secret"]) == (self.client_id, self.client_secret)
            return "client_secret_post" if ok and "client_secret_post" in self.auth_methods else None
        ok = form.get("client_id") == self.client_id and self.client_secret is None
        return "none" if ok and "none" in self.auth_methods else None

    def id_token(self, grant: Grant) -> str:
        """The ID token for ``grant``, signed (or forged) as configured."""
        now = self.now()
        claims = {"iss": self.issuer, "aud": grant.client_id, "iat": now, "exp": now + 300, "auth_time": now}
        claims |= {"nonce": grant.nonce} | grant.user | self.id_token_claims
        claims = {k: v for k, v in claims.items() if v is not None}
        key = self.signing_key
        if self.forge == "none":
            return _unsigned({"alg": "none", "kid": key.kid} | self.id_token_header, claims, lambda _: b"")
        if self.forge == "hs256":
            mac = lambda signing_input: hmac.digest(key.public_pem, signing_input, hashlib.sha256)  # noqa: E731
            return _unsigned({"alg": "HS256", "kid": key.kid} | self.id_token_header, claims, mac)
        if self.forge == "bad-signature":
            key = SigningKey(key.kid, key.alg, SigningKey.new(key.alg, unlike=[key]).private)
        return key.sign(claims, self.id_token_header)


_KEY_POOL: dict[str, list[PrivateKey]] = {"RS": [], "ES": []}
_KEY_POOL_SIZE = 4
_key_turn = itertools.count()


def _private_key(alg: str, avoid: list[PrivateKey]) -> PrivateKey:
    """A private key for ``alg`` from a small pool (RSA keys take a while to make and tests need many)."""
    pool = _KEY_POOL[alg[:2]]
    spare = [key for key in pool if all(key is not other for other in avoid)]
    if len(pool) < _KEY_POOL_SIZE or not spare:
        if alg.startswith("ES"):
            pool.append(ec.generate_private_key(ec.SECP256R1()))
        else:
            pool.append(rsa.generate_private_key(public_exponent=65537, key_size=2048))
        return pool[-1]
    return spare[next(_key_turn) % len(spare)]


def _pkce_holds(grant: Grant, verifier: str | None) -> bool:
    if grant.challenge is None:
        return True
    if grant.method != "S256" or not verifier:
        return False
    return _b64(hashlib.sha256(verifier.encode()).digest()) == grant.challenge


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unsigned(header: dict[str, Any], claims: dict[str, Any], sign: Any) -> str:
    """A JWT put together by hand, for algorithms PyJWT rightly refuses to produce (none; HS256 with a PEM key)."""
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    return f"{signing_input}.{_b64(sign(signing_input.encode()))}"


async def authorize(url: str) -> dict[str, str]:
    """What a browser sent to ``url`` (a ``Login.url``) brings back to the callback: its query parameters."""
    async with httpx.AsyncClient() as browser:
        response = await browser.get(url)
    assert response.status_code == 302, response.text
    return dict(httpx.URL(response.headers["location"]).params)
