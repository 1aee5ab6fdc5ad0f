"""Panel sign-in through OpenID Connect, against a real local provider (``tests/oidc_provider.py``)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import html
import json
import logging
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from tests.conftest import views_of
from tests.oidc_provider import CLIENT_ID, OidcProvider, SigningKey, authorize
from vigil.app.health import Health
from vigil.cases.store import CaseStore
from vigil.core.clock import Clock, ManualClock, SystemClock
from vigil.core.errors import AuthError, AuthUnavailable, SettingsError
from vigil.core.metrics import Metrics
from vigil.panel.id_token import public_key
from vigil.panel.identity import Identity
from vigil.panel.oidc import OidcClient, PendingLogin
from vigil.panel.settings import OidcSettings, PanelSettings
from vigil.testing import panel_app

REDIRECT = "http://127.0.0.1:9/auth/oidc/callback"  # never served: the tests read the redirect instead of following it


@pytest.fixture
async def provider() -> AsyncIterator[OidcProvider]:
    async with OidcProvider(redirect_uri=REDIRECT) as running:
        yield running


@pytest.fixture
async def client(provider: OidcProvider) -> AsyncIterator[OidcClient]:
    async with connected(provider.settings()) as oidc:
        yield oidc


class connected:
    """A started ``OidcClient``, closed on exit."""

    def __init__(self, settings: OidcSettings, clock: Clock | None = None) -> None:
        self.client = OidcClient(settings, clock=clock or SystemClock())

    async def __aenter__(self) -> OidcClient:
        await self.client.start()
        return self.client

    async def __aexit__(self, *exc: object) -> None:
        await self.client.close()


async def sign_in(client: OidcClient) -> Identity:
    """The whole flow, as a browser and the callback route would drive it."""
    login = await client.begin()
    callback = await authorize(login.url)
    return await client.finish(
        login,
        code=callback.get("code"),
        state=callback.get("state"),
        error=callback.get("error"),
        iss=callback.get("iss"),
    )


async def test_signs_in_through_the_provider(client: OidcClient, provider: OidcProvider) -> None:
    identity = await sign_in(client)

    assert identity == Identity(name="ana@example.com", role="lead", tenants=("acme",))
    (call,) = provider.token_requests
    assert call.auth_method == "client_secret_basic"
    assert call.form["redirect_uri"] == REDIRECT
    assert "client_secret" not in call.form


async def test_authorization_url_asks_for_a_code_with_pkce(client: OidcClient, provider: OidcProvider) -> None:
    first, second = await client.begin(), await client.begin()

    url = httpx.URL(first.url)
    assert str(url.copy_with(query=None)) == f"{provider.issuer}/authorize"
    assert dict(url.params) == {
        "response_type": "code",
        "client_id": CLIENT_ID,
        "redirect_uri": REDIRECT,
        "scope": "openid email profile",
        "state": first.state,
        "nonce": first.nonce,
        "code_challenge": base64.urlsafe_b64encode(hashlib.sha256(first.code_verifier.encode()).digest())
        .rstrip(b"=")
        .decode(),
        "code_challenge_method": "S256",
    }
    assert 43 <= len(first.code_verifier) <= 128
    assert {first.state, first.nonce, first.code_verifier}.isdisjoint(
        {second.state, second.nonce, second.code_verifier}
    )


@pytest.mark.parametrize(
    ("methods", "secret", "used"),
    [
        (("client_secret_post",), "provider-secret", "client_secret_post"),
        (("client_secret_basic",), "provider-secret", "client_secret_basic"),
        (("none",), None, "none"),
    ],
)
async def test_authenticates_to_the_token_endpoint_as_the_provider_advertises(
    methods: tuple[str, ...], secret: str | None, used: str
) -> None:
    provider = OidcProvider(redirect_uri=REDIRECT, auth_methods=methods, client_secret=secret)
    async with provider, connected(provider.settings()) as client:
        assert (await sign_in(client)).name == "ana@example.com"
    assert [call.auth_method for call in provider.token_requests] == [used]


async def test_wrong_client_secret_is_refused(provider: OidcProvider) -> None:
    async with connected(provider.settings(client_secret="nope")) as client:
        with pytest.raises(AuthError, match="invalid_client"):
            await sign_in(client)


async def test_pkce_verifier_mismatch_is_refused_by_the_provider(client: OidcClient, provider: OidcProvider) -> None:
    login = await client.begin()
    callback = await authorize(login.url)
    stolen = PendingLogin(login.state, login.nonce, "another-verifier-" + "x" * 40, login.started_at)

    with pytest.raises(AuthError, match="invalid_grant"):
        await client.finish(stolen, code=callback["code"], state=callback["state"])
    assert provider.token_requests[-1].status == 400


async def test_state_mismatch_is_refused_before_redeeming_the_code(client: OidcClient, provider: OidcProvider) -> None:
    login = await client.begin()
    callback = await authorize(login.url)

    with pytest.raises(AuthError, match="not started in this browser"):
        await client.finish(login, code=callback["code"], state="forged")
    assert provider.reads["token"] == 0


def claims(**values: Any) -> Callable[[OidcProvider], None]:
    return lambda p: p.id_token_claims.update({k: v(p) if callable(v) else v for k, v in values.items()})


def setting(name: str, value: Any) -> Callable[[OidcProvider], None]:
    return lambda p: setattr(p, name, value)


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (claims(exp=lambda p: p.now() - 3600, iat=lambda p: p.now() - 3900), "expired"),
        (claims(exp=None), "no 'exp' claim"),
        (claims(iat=lambda p: p.now() + 3600, exp=lambda p: p.now() + 3900), "issued in the future"),
        (claims(nbf=lambda p: p.now() + 3600), "not valid yet"),
        (claims(aud="someone-else"), "another client"),
        (claims(aud=[CLIENT_ID, "someone-else"]), "no authorized party"),
        (claims(azp="someone-else"), "issued to another client"),
        (claims(iss="http://127.0.0.1:1"), "another issuer"),
        (claims(nonce="another-nonce"), "nonce"),
        (claims(nonce=None), "nonce"),
        (setting("forge", "bad-signature"), "signature is not valid"),
        (setting("forge", "none"), "signed with 'none'"),
        (setting("forge", "hs256"), "signed with 'HS256'"),
        (setting("id_token_header", {"kid": "ghost"}), "key the sign-in provider does not publish"),
    ],
    ids=[
        "expired",
        "no-exp",
        "future-iat",
        "future-nbf",
        "other-audience",
        "audiences-without-azp",
        "other-azp",
        "other-issuer",
        "other-nonce",
        "no-nonce",
        "bad-signature",
        "alg-none",
        "hs256-with-public-key",
        "unknown-kid",
    ],
)
async def test_id_token_is_verified(
    client: OidcClient, provider: OidcProvider, breakage: Callable[[OidcProvider], None], message: str
) -> None:
    breakage(provider)

    with pytest.raises(AuthError, match=message) as caught:
        await sign_in(client)
    assert not isinstance(caught.value, AuthUnavailable)


async def test_small_clock_skew_and_several_audiences_with_azp_are_accepted(
    client: OidcClient, provider: OidcProvider
) -> None:
    now = provider.now()
    provider.id_token_claims = {"iat": now + 30, "nbf": now + 30, "aud": [CLIENT_ID, "api"], "azp": CLIENT_ID}

    assert (await sign_in(client)).name == "ana@example.com"


async def test_expiry_is_judged_by_the_injected_clock(provider: OidcProvider) -> None:
    clock = ManualClock(datetime.fromtimestamp(provider.now() + 400, UTC))  # the token lives 300 s
    async with connected(provider.settings(), clock) as client:
        with pytest.raises(AuthError, match="expired"):
            await sign_in(client)


async def test_a_sign_in_left_too_long_is_refused(provider: OidcProvider) -> None:
    clock = ManualClock(datetime.now(UTC))
    async with connected(provider.settings(), clock) as client:
        login = await client.begin()
        callback = await authorize(login.url)
        clock.advance(601)
        with pytest.raises(AuthError, match="too long"):
            await client.finish(login, code=callback["code"], state=callback["state"])


async def test_key_rotation_is_picked_up(client: OidcClient, provider: OidcProvider) -> None:
    await sign_in(client)
    provider.rotate("ES256", keep_old=False)

    assert (await sign_in(client)).name == "ana@example.com"
    assert provider.reads["jwks"] == 2


async def test_an_unknown_key_reads_the_keys_once_more_and_no_more(client: OidcClient, provider: OidcProvider) -> None:
    provider.id_token_header = {"kid": "ghost"}

    for _ in range(2):
        with pytest.raises(AuthError, match="does not publish"):
            await sign_in(client)
    assert provider.reads["jwks"] == 3  # at start, then once per token naming the unknown key


def test_a_key_verifies_only_with_its_own_algorithm() -> None:
    rsa_jwk, ec_jwk = SigningKey.new("RS256").jwk, SigningKey.new("ES256").jwk

    assert public_key(rsa_jwk, "RS256").algorithm_name == "RS256"
    for jwk, alg in [(rsa_jwk, "ES256"), (ec_jwk, "RS256"), (rsa_jwk, "PS256")]:  # the RSA key says "alg": "RS256"
        with pytest.raises(AuthError, match="does not fit"):
            public_key(jwk, alg)


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        ({"tenant": ["acme", "globex"]}, Identity("ana@example.com", "lead", ("acme", "globex"))),
        ({"tenant": "globex"}, Identity("ana@example.com", "lead", ("globex",))),
        ({"vigil_role": "superuser"}, Identity("ana@example.com", "analyst", ("acme",))),
        ({"vigil_role": None}, Identity("ana@example.com", "analyst", ("acme",))),
        ({"vigil_role": ["analyst", "admin"]}, Identity("ana@example.com", "admin", ("acme",))),
        ({"email": None}, Identity("u-1", "lead", ("acme",))),
    ],
)
async def test_claims_map_to_the_identity(
    client: OidcClient, provider: OidcProvider, user: dict[str, Any], expected: Identity
) -> None:
    provider.user = {k: v for k, v in (provider.user | user).items() if v is not None}

    assert await sign_in(client) == expected


async def test_claim_names_and_default_role_come_from_the_settings(provider: OidcProvider) -> None:
    provider.user = {"sub": "u-9", "preferred_username": "bo", "groups": ["initech"], "roles": ["viewer"]}
    settings = provider.settings(
        name_claim="preferred_username", tenant_claim="groups", role_claim="roles", default_role="lead"
    )
    async with connected(settings) as client:
        assert await sign_in(client) == Identity("bo", "lead", ("initech",))


@pytest.mark.parametrize("tenant", [None, [], "", [""]])
async def test_a_user_without_tenant_is_refused(client: OidcClient, provider: OidcProvider, tenant: Any) -> None:
    provider.user = {k: v for k, v in (provider.user | {"tenant": tenant}).items() if v is not None}

    with pytest.raises(AuthError, match="no tenant"):
        await sign_in(client)


async def test_provider_refusal_is_shown_safely(client: OidcClient, provider: OidcProvider) -> None:
    provider.deny = "access_denied"
    with pytest.raises(AuthError, match="access_denied"):
        await sign_in(client)

    login = await client.begin()
    with pytest.raises(AuthError) as caught:
        await client.finish(login, code=None, state=login.state, error="<script>alert(1)</script>")
    assert "<" not in str(caught.value)


async def test_callback_from_another_issuer_is_refused(client: OidcClient) -> None:
    login = await client.begin()
    callback = await authorize(login.url)

    with pytest.raises(AuthError, match="another provider"):
        await client.finish(login, code=callback["code"], state=callback["state"], iss="http://127.0.0.1:1")


async def test_discovery_naming_another_issuer_is_refused(
    provider: OidcProvider, caplog: pytest.LogCaptureFixture
) -> None:
    provider.discovery_issuer = "http://127.0.0.1:1"
    async with connected(provider.settings()) as client:
        assert "calls itself" in caplog.text
        with pytest.raises(AuthError, match="calls itself") as caught:
            await client.begin()
    assert not isinstance(caught.value, AuthUnavailable)


async def test_provider_down_at_start_then_up_later(caplog: pytest.LogCaptureFixture) -> None:
    provider = OidcProvider(redirect_uri=REDIRECT)
    caplog.set_level(logging.WARNING, logger="vigil.panel.oidc")
    async with connected(provider.settings()) as client:
        assert "sign-in will try again" in caplog.text
        with pytest.raises(AuthUnavailable, match="cannot be reached"):
            await client.begin()

        async with provider:
            assert await sign_in(client) == Identity("ana@example.com", "lead", ("acme",))
    assert provider.reads["discovery"] == 1


async def test_provider_down_during_sign_in(client: OidcClient, provider: OidcProvider) -> None:
    login = await client.begin()
    callback = await authorize(login.url)
    await provider.stop()

    with pytest.raises(AuthUnavailable, match="cannot be reached"):
        await client.finish(login, code=callback["code"], state=callback["state"])


async def test_token_endpoint_failure_is_unavailable(client: OidcClient, provider: OidcProvider) -> None:
    provider.token_status = 503

    with pytest.raises(AuthUnavailable, match="503"):
        await sign_in(client)


async def test_a_hanging_provider_times_out(provider: OidcProvider) -> None:
    provider.hang = {"token"}
    async with connected(provider.settings(timeout_s=0.3)) as client:
        # A deadline on the wait only (the provider would hang until it stops); bench.lifecycle measures how long.
        async with asyncio.timeout(10):
            with pytest.raises(AuthUnavailable, match="ReadTimeout"):
                await sign_in(client)
    assert provider.reads["token"] == 1  # it gave up on the hanging token request, and did not retry it


async def test_pending_login_survives_the_session_and_nothing_else() -> None:
    pending = PendingLogin("s", "n", "v" * 43, 1700000000.5)

    assert PendingLogin.from_session(json.loads(json.dumps(pending.to_session()))) == pending
    for stored in (None, {}, "s", {**pending.to_session(), "state": ""}, {**pending.to_session(), "started_at": "x"}):
        with pytest.raises(AuthError, match="no sign-in in progress"):
            PendingLogin.from_session(stored)


async def test_close_leaves_a_shared_http_client_open(provider: OidcProvider) -> None:
    async with httpx.AsyncClient() as http:
        client = OidcClient(provider.settings(), clock=SystemClock(), http=http)
        await client.start()
        await client.close()
        assert not http.is_closed


def test_unset_settings_are_named() -> None:
    with pytest.raises(SettingsError, match="VIGIL_PANEL__OIDC__ISSUER"):
        OidcClient(OidcSettings(client_id="c", redirect_url=REDIRECT), clock=SystemClock())


# Through the panel: the callback route, the session it starts ---------------------------------------------------


@contextlib.asynccontextmanager
async def panel(
    store: CaseStore, provider: OidcProvider, clock: Clock | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    """A browser on a panel that signs in through ``provider``; ``clock`` is the panel's (the ID tokens are judged by
    the machine's, as the provider makes them)."""
    metrics = Metrics(CollectorRegistry())
    async with connected(provider.settings()) as oidc:
        app = panel_app(
            views=views_of(store),
            health=Health({}, clock=SystemClock(), metrics=metrics, interval_s=1),
            metrics=metrics,
            clock=clock,
            panel=PanelSettings(auth="oidc", oidc=provider.settings()),
            oidc=oidc,
        )
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://vigil.test") as browser:
            yield browser


async def through_the_provider(browser: httpx.AsyncClient) -> httpx.Response:
    """The sign-in as a browser makes it: to the provider, and back to the callback; the callback's answer."""
    start = await browser.get("/auth/oidc/login", params={"next": "/panel"})
    assert start.status_code == 303
    return await browser.get("/auth/oidc/callback", params=await authorize(start.headers["location"]))


@pytest.mark.parametrize("tenant", ["*", ["acme", "*"]], ids=["every-tenant", "one-and-every-tenant"])
async def test_a_tenant_claim_of_every_tenant_refuses_the_sign_in(
    store: CaseStore, provider: OidcProvider, tenant: str | list[str]
) -> None:
    async with panel(store, provider) as browser:
        provider.user = provider.user | {"tenant": tenant}
        refused = await through_the_provider(browser)
        assert refused.status_code == 403 and "names the tenant '*' (every tenant)" in html.unescape(refused.text)
        assert (await browser.get("/api/whoami")).status_code == 401
        # Tenants listed one by one are fine.
        provider.user = provider.user | {"tenant": ["acme", "globex"]}
        signed_in = await through_the_provider(browser)
        assert signed_in.status_code == 303 and signed_in.headers["location"] == "/panel"
        assert (await browser.get("/api/whoami")).json()["tenants"] == ["acme", "globex"]


async def test_an_oidc_session_signs_in_again_within_the_hour_and_picks_up_a_new_role(
    store: CaseStore, provider: OidcProvider
) -> None:
    clock = ManualClock(datetime.now(UTC))
    assert PanelSettings().oidc.session_max_age_s == 3600  # well below the 12 h of a token user's sign-in
    async with panel(store, provider, clock) as browser:
        assert (await through_the_provider(browser)).status_code == 303
        assert (await browser.get("/api/whoami")).json()["role"] == "lead"
        provider.user = provider.user | {"vigil_role": "analyst"}  # the provider takes the lead role away
        clock.advance(3599)
        assert (await browser.get("/api/whoami")).json()["role"] == "lead"
        clock.advance(2)
        assert (await browser.get("/api/whoami")).status_code == 401
        page = await browser.get("/panel", headers={"Accept": "text/html"})
        assert page.status_code == 303 and page.headers["location"].startswith("/login")
        assert (await through_the_provider(browser)).status_code == 303
        assert (await browser.get("/api/whoami")).json()["role"] == "analyst"
