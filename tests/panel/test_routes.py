"""The panel over HTTP, in process: sign-in, bearer tokens, roles, tenants, CSRF, feedback, pages, headers.

(The same panel in a real browser against a running daemon: tests/e2e/test_panel_browser.py.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from tests.browser import chromium
from tests.conftest import case_store, make_settings, open_knowledge, views_of, wait_for
from tests.sse import sse_events
from vigil import testing
from vigil.app.cli import main
from vigil.app.health import Health
from vigil.app.http import SESSION_COOKIE, EmbeddedServer
from vigil.cases.store import CaseStore
from vigil.core.clock import Clock, ManualClock, SystemClock
from vigil.core.metrics import Metrics
from vigil.flow.feed import LiveFeed, Update
from vigil.knowledge.documents import read
from vigil.knowledge.store import KnowledgeStore
from vigil.panel.auth import token_digest
from vigil.panel.routes import LIVE_RECHECK_S
from vigil.panel.settings import PanelSettings, PanelUser
from vigil.transport.memory import MemoryOutbox
from vigil.wire.events import Feedback, Message, Suggestion, parse

NOW = datetime.now(UTC).replace(microsecond=0)
TOKENS = {"ana": "ana-secret-token", "lee": "lee-secret-token", "root": "root-secret-token", "ada": "ada-token"}
USERS = [
    PanelUser(name="ana", role="analyst", tenants=["acme"], token_sha256=token_digest(TOKENS["ana"])),
    PanelUser(name="lee", role="lead", tenants=["globex"], token_sha256=token_digest(TOKENS["lee"])),
    PanelUser(name="root", role="admin", tenants=["*"], token_sha256=token_digest(TOKENS["root"])),
    PanelUser(name="ada", role="admin", tenants=["acme"], token_sha256=token_digest(TOKENS["ada"])),
]


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


async def say(store: CaseStore, conversation: str, tenant: str, n: int, text: str, role: str = "customer") -> None:
    raw = {
        "type": "message",
        "schema_version": 1,
        "message_id": f"{conversation}-m{n}",
        "conversation_id": conversation,
        "tenant": tenant,
        "sent_at": (NOW - timedelta(minutes=10 - n)).isoformat(),
        "role": role,
        "text": text,
    }
    event = parse(json.dumps(raw).encode(), max_event_bytes=1 << 20, max_text_bytes=1 << 16)
    assert isinstance(event, Message)
    await store.record(event)


async def suggest(store: CaseStore, conversation: str, tenant: str, suggestion_id: str, made: datetime = NOW) -> None:
    suggestion = Suggestion(
        suggestion_id=suggestion_id,
        conversation_id=conversation,
        tenant=tenant,
        in_reply_to=f"{conversation}-m1",
        created_at=made,
        kind="answer",
        text="Your bill is taken on the 1st.",
        why="matches the FAQ",
        confidence=0.9,
        latency_ms=12.0,
    )
    await store.save_suggestion(suggestion)
    await store.mark_published([suggestion_id])


@pytest.fixture
async def seeded(store: CaseStore) -> CaseStore:
    await say(store, "acme-1", "acme", 1, "When do you take the money?")
    await suggest(store, "acme-1", "acme", "s-acme")
    await say(store, "globex-1", "globex", 1, "Where is my parcel?")
    await suggest(store, "globex-1", "globex", "s-globex")
    return store


@pytest.fixture
def outbox() -> MemoryOutbox:
    return MemoryOutbox()


def panel_app(  # type: ignore[no-untyped-def]
    store: CaseStore,
    outbox: MemoryOutbox,
    registry,
    clock: Clock | None = None,
    feed: LiveFeed | None = None,
    knowledge: KnowledgeStore | None = None,
    **panel: object,
) -> FastAPI:
    metrics = Metrics(registry)
    settings = PanelSettings(**{"auth": "tokens", "users": USERS, **panel})  # type: ignore[arg-type]
    return testing.panel_app(
        views=views_of(store),
        health=Health({}, clock=SystemClock(), metrics=metrics, interval_s=1),
        metrics=metrics,
        clock=clock,
        feed=feed,
        knowledge=knowledge,
        outboxes=[outbox],
        panel=settings,
    )


def panel_client(  # type: ignore[no-untyped-def]
    store: CaseStore, outbox: MemoryOutbox, registry, base_url: str = "http://vigil.test", **panel: object
) -> httpx.AsyncClient:
    app = panel_app(store, outbox, registry, **panel)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url)


@pytest.fixture
async def client(seeded: CaseStore, outbox: MemoryOutbox, registry) -> AsyncIterator[httpx.AsyncClient]:  # type: ignore[no-untyped-def]
    async with panel_client(seeded, outbox, registry) as c:
        yield c


async def post_sign_in(client: httpx.AsyncClient, name: str) -> httpx.Response:
    """Sign in through the form, as a browser does; returns the answer that sets the session cookie."""
    page = await client.get("/login")
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert page.status_code == 200 and csrf
    answer = await client.post(
        "/login", data={"token": TOKENS[name], "csrf_token": csrf.group(1), "next": "/panel"}, follow_redirects=False
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/panel"
    return answer


async def sign_in(client: httpx.AsyncClient, name: str) -> str:
    """Sign in through the form, as a browser does; returns the session's CSRF token."""
    await post_sign_in(client, name)
    panel = await client.get("/panel")
    token = re.search(r'<meta name="csrf-token" content="([^"]+)"', panel.text)
    assert token
    return token.group(1)


async def test_nobody_gets_in_without_signing_in(client: httpx.AsyncClient):
    for path in ("/api/queue", "/api/conversations", "/api/conversations/acme-1", "/api/live", "/api/whoami"):
        answer = await client.get(path)
        assert answer.status_code == 401, path
        assert answer.headers["www-authenticate"].startswith("Bearer")
    page = await client.get("/panel/conversations/acme-1", headers={"Accept": "text/html"})
    assert page.status_code == 303 and page.headers["location"] == "/login?next=/panel/conversations/acme-1"
    assert (await client.get("/api/queue", headers={"Authorization": "Bearer not-a-token"})).status_code == 401
    feedback = await client.post("/api/suggestions/s-acme/feedback", json={"verdict": "accepted"})
    assert feedback.status_code == 401
    # Operations stay open (probes and Prometheus do not sign in).
    assert (await client.get("/healthz")).status_code == 200


async def test_each_person_sees_only_their_tenants(client: httpx.AsyncClient):
    queue = (await client.get("/api/queue", headers=bearer("ana"))).json()
    assert [c["conversation_id"] for c in queue] == ["acme-1"]
    assert queue[0]["unread_suggestions"] == ["s-acme"] and queue[0]["waiting_since"] is not None
    for path in ("/api/conversations/globex-1", "/panel/conversations/globex-1"):
        refused = await client.get(path, headers=bearer("ana"))
        assert refused.status_code == 404 and "Where is my parcel" not in refused.text
    mine = await client.get("/api/conversations/acme-1", headers=bearer("ana"))
    assert mine.status_code == 200 and mine.json()["suggestions"][0]["why"] == "matches the FAQ"
    other = await client.post("/api/suggestions/s-globex/feedback", json={"verdict": "accepted"}, headers=bearer("ana"))
    assert other.status_code == 404
    everything = (await client.get("/api/conversations", headers=bearer("root"))).json()
    assert {c["conversation_id"] for c in everything} == {"acme-1", "globex-1"}


def through(at: datetime) -> dict[str, str]:
    return {"through": at.isoformat()}


async def test_reading_a_conversation_clears_its_unread_suggestions_for_the_reader_only(
    client: httpx.AsyncClient, seeded: CaseStore
):
    async def unread(name: str) -> dict[str, list[str]]:
        queue = (await client.get("/api/queue", headers=bearer(name))).json()
        return {c["conversation_id"]: c["unread_suggestions"] for c in queue}

    assert await unread("root") == {"acme-1": ["s-acme"], "globex-1": ["s-globex"]}
    # Read through an earlier suggestion than s-acme: s-acme stays unread.
    earlier = await client.post(
        "/api/conversations/acme-1/read", json=through(NOW - timedelta(minutes=1)), headers=bearer("ana")
    )
    assert earlier.status_code == 204 and await unread("ana") == {"acme-1": ["s-acme"]}
    read = await client.post("/api/conversations/acme-1/read", json=through(NOW), headers=bearer("ana"))
    assert read.status_code == 204
    assert await unread("ana") == {"acme-1": []}
    assert await unread("root") == {"acme-1": ["s-acme"], "globex-1": ["s-globex"]}
    # A time still to come counts as now: a suggestion made later stays unread.
    ahead = through(datetime.now(UTC) + timedelta(days=1))
    assert (await client.post("/api/conversations/acme-1/read", json=ahead, headers=bearer("ana"))).status_code == 204
    await suggest(seeded, "acme-1", "acme", "s-acme-later", made=datetime.now(UTC) + timedelta(hours=1))
    assert await unread("ana") == {"acme-1": ["s-acme-later"]}
    for refused in ("globex-1", "nobody-1"):
        answer = await client.post(f"/api/conversations/{refused}/read", json=through(NOW), headers=bearer("ana"))
        assert answer.status_code == 404, refused
    naive = await client.post(
        "/api/conversations/acme-1/read", json={"through": "2026-11-30T10:00:00"}, headers=bearer("ana")
    )
    assert naive.status_code == 422
    assert (await client.post("/api/conversations/acme-1/read", json=through(NOW))).status_code == 401
    page = await client.get("/panel", headers=bearer("ana"))
    data = re.search(r'<script id="vigil-data" type="application/json">(.*?)</script>', page.text, re.S)
    assert data and [c["unread_suggestions"] for c in json.loads(data.group(1))] == [["s-acme-later"]]


@pytest.mark.parametrize("at", ["0001-01-01T00:00:00+00:01", "9999-12-31T23:59:59-00:01"])
async def test_a_read_mark_at_a_time_with_no_utc_equivalent_is_a_422(client: httpx.AsyncClient, at: str):
    # Valid RFC 3339, but in UTC the instant falls in year 0 or year 10000, which no datetime can hold.
    answer = await client.post("/api/conversations/acme-1/read", json={"through": at}, headers=bearer("ana"))
    assert answer.status_code == 422
    assert "in UTC" in answer.json()["detail"][0]["msg"]
    unread = (await client.get("/api/queue", headers=bearer("ana"))).json()
    assert [c["unread_suggestions"] for c in unread] == [["s-acme"]]


async def test_feedback_becomes_a_feedback_event_on_the_stream(client: httpx.AsyncClient, outbox: MemoryOutbox):
    answer = await client.post(
        "/api/suggestions/s-acme/feedback", json={"verdict": "edited", "text": "It is the 1st."}, headers=bearer("ana")
    )
    assert answer.status_code == 202
    ((tenant, conversation, value),) = outbox.submitted
    event = parse(value, max_event_bytes=1 << 20, max_text_bytes=1 << 16)
    assert (tenant, conversation) == ("acme", "acme-1")
    assert event.type == "feedback" and event.feedback_id == answer.json()["feedback_id"]
    assert (event.suggestion_id, event.verdict, event.by, event.text, event.tenant) == (
        "s-acme",
        "edited",
        "ana",
        "It is the 1st.",
        "acme",
    )
    no_text = await client.post("/api/suggestions/s-acme/feedback", json={"verdict": "edited"}, headers=bearer("ana"))
    assert no_text.status_code == 422
    bad_verdict = await client.post("/api/suggestions/s-acme/feedback", json={"verdict": "meh"}, headers=bearer("ana"))
    assert bad_verdict.status_code == 422
    assert len(outbox.submitted) == 1


async def test_a_signed_in_browser_needs_the_csrf_token(client: httpx.AsyncClient, outbox: MemoryOutbox):
    csrf = await sign_in(client, "ana")
    assert (await client.get("/api/whoami")).json() == {"name": "ana", "role": "analyst", "tenants": ["acme"]}
    url = "/api/suggestions/s-acme/feedback"
    assert (await client.post(url, json={"verdict": "accepted"})).status_code == 403
    wrong = await client.post(url, json={"verdict": "accepted"}, headers={"X-CSRF-Token": "guess"})
    assert wrong.status_code == 403
    elsewhere = await client.post(
        url, json={"verdict": "accepted"}, headers={"X-CSRF-Token": csrf, "Origin": "https://evil.example"}
    )
    assert elsewhere.status_code == 403
    assert outbox.submitted == []
    read = "/api/conversations/acme-1/read"
    assert (await client.post(read, json=through(NOW))).status_code == 403
    assert (await client.post(read, json=through(NOW), headers={"X-CSRF-Token": csrf})).status_code == 204
    ok = await client.post(url, json={"verdict": "dismissed", "text": "wrong plan"}, headers={"X-CSRF-Token": csrf})
    assert ok.status_code == 202 and len(outbox.submitted) == 1
    # Signing out needs the token too, and ends the session.
    assert (await client.post("/logout", data={"csrf_token": "guess"})).status_code == 403
    assert (await client.post("/logout", data={"csrf_token": csrf}, follow_redirects=False)).status_code == 303
    assert (await client.get("/api/whoami")).status_code == 401


async def test_sign_in_refuses_a_wrong_token_and_a_forged_form(client: httpx.AsyncClient):
    page = await client.get("/login")
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert csrf
    wrong = await client.post("/login", data={"token": "nope", "csrf_token": csrf.group(1)})
    assert wrong.status_code == 401 and "not valid" in wrong.text
    forged = await client.post("/login", data={"token": TOKENS["ana"], "csrf_token": "x"})
    assert forged.status_code == 403
    assert (await client.get("/api/whoami")).status_code == 401
    # After signing in, only paths on this site are followed.
    answer = await client.post(
        "/login", data={"token": TOKENS["ana"], "csrf_token": csrf.group(1), "next": "//evil.example/x"}
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/panel"


async def test_the_overview_is_for_leads(client: httpx.AsyncClient):
    assert (await client.get("/panel/overview", headers=bearer("ana"))).status_code == 403
    page = await client.get("/panel/overview", headers=bearer("lee"))
    assert page.status_code == 200 and "<svg" in page.text
    assert "Knowledge by source" in page.text and "of them mined from resolved cases" in page.text


async def test_pages_carry_a_strict_content_security_policy_and_are_never_cached(client: httpx.AsyncClient):
    page = await client.get("/panel", headers=bearer("ana"))
    assert page.status_code == 200
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    # Customer text stays out of caches, and Back never brings up a stale queue; the script may be cached.
    assert page.headers["cache-control"] == "no-store"
    assert (await client.get("/api/queue", headers=bearer("ana"))).headers["cache-control"] == "no-store"
    script = await client.get("/panel/static/panel.js")
    assert script.status_code == 200 and "cache-control" not in script.headers


async def test_customer_text_is_data_in_the_page_never_markup(seeded: CaseStore, outbox: MemoryOutbox, registry):  # type: ignore[no-untyped-def]
    hostile = "</script><script>alert('x')</script><img src=x onerror=alert(1)>"
    await say(seeded, "acme-2", "acme", 1, hostile)
    async with panel_client(seeded, outbox, registry) as client:
        page = await client.get("/panel/conversations/acme-2", headers=bearer("ana"))
    assert page.status_code == 200
    assert "<script>alert" not in page.text and "<img src=x" not in page.text
    embedded = re.search(r'<script id="vigil-data" type="application/json">(.*?)</script>', page.text, re.S)
    assert embedded and json.loads(embedded.group(1))["messages"][0]["text"] == hostile


async def test_without_auth_everyone_on_loopback_is_a_local_admin(seeded: CaseStore, outbox: MemoryOutbox, registry):  # type: ignore[no-untyped-def]
    async with panel_client(seeded, outbox, registry, "http://127.0.0.1:8080", auth="none", users=[]) as client:
        assert (await client.get("/api/whoami")).json()["role"] == "admin"
        assert len((await client.get("/api/queue")).json()) == 2
        # CSRF still applies to browsers: a page on another site cannot make the local panel act.
        answer = await client.post(
            "/api/suggestions/s-acme/feedback", json={"verdict": "accepted"}, headers={"Origin": "https://evil.example"}
        )
        assert answer.status_code == 403
        # Nor read it by rebinding its own name to 127.0.0.1: the request names that site, and is nobody's.
        rebound = await client.get("/api/queue", headers={"Host": "evil.example:8080"})
        assert rebound.status_code == 401
    ipv6 = panel_client(seeded, outbox, CollectorRegistry(), "http://[::1]:8080", auth="none", users=[])
    async with ipv6 as client:
        page = await client.get("/panel")
        csrf = re.search(r'<meta name="csrf-token" content="([^"]+)"', page.text)
        assert page.status_code == 200 and csrf
        headers = {"X-CSRF-Token": csrf.group(1), "Origin": "http://[::1]:8080"}
        answer = await client.post("/api/conversations/acme-1/read", json=through(NOW), headers=headers)
        assert answer.status_code == 204


# Sessions: the cookie, a secret shared by the replicas, sign-out and revocation held in the database --------------

SECRET = "a-session-secret-all-replicas-share"


@pytest.fixture
async def second_replica(seeded: CaseStore, db_url: str, tmp_path) -> AsyncIterator[CaseStore]:  # type: ignore[no-untyped-def]
    """Another replica's own connection pool to the same database."""
    replica = case_store(make_settings(tmp_path=tmp_path, db_url=db_url))
    try:
        yield replica
    finally:
        await replica.close()


def session_cookie(answer: httpx.Response) -> tuple[str, set[str]]:
    """The session cookie an answer sets: its value and its attributes (lower case, ``max-age=N`` included)."""
    (header,) = [h for h in answer.headers.get_list("set-cookie") if h.startswith(f"{SESSION_COOKIE}=")]
    value, *attributes = (part.strip() for part in header.split(";"))
    return value.removeprefix(f"{SESSION_COOKIE}="), {a.lower() for a in attributes}


def browser(
    app: FastAPI, cookie: str | None = None, client: tuple[str, int] = ("127.0.0.1", 50000)
) -> httpx.AsyncClient:
    """A browser on ``app`` (a replica), carrying ``cookie`` if given (as copied from another browser)."""
    transport = httpx.ASGITransport(app=app, client=client)
    headers = {"Cookie": f"{SESSION_COOKIE}={cookie}"} if cookie else {}
    return httpx.AsyncClient(transport=transport, base_url="http://vigil.test", headers=headers)


async def test_the_session_cookie_is_http_only_same_site_lax_and_lives_max_age(
    seeded: CaseStore, outbox: MemoryOutbox, registry
):  # type: ignore[no-untyped-def]
    async with browser(panel_app(seeded, outbox, registry, session_max_age_s=7200)) as client:
        _, attributes = session_cookie(await post_sign_in(client, "ana"))
    assert {"httponly", "samesite=lax", "max-age=7200", "path=/"} <= attributes
    assert "secure" not in attributes  # plain HTTP on a trusted network: a Secure cookie would never come back


async def test_the_session_cookie_is_secure_behind_tls(seeded: CaseStore, outbox: MemoryOutbox, registry):  # type: ignore[no-untyped-def]
    def attributes(answer: httpx.Response) -> set[str]:
        return session_cookie(answer)[1]

    # The cookie the sign-in page sets (for its CSRF token) is the session cookie: the browser never returns a
    # Secure cookie over plain HTTP, so these browsers sign in no further.
    async with browser(panel_app(seeded, outbox, registry, secure_cookies=True)) as client:
        assert "secure" in attributes(await client.get("/login"))
    # Without the setting: served over HTTPS, or behind a proxy that uvicorn trusts to say it terminated TLS.
    app = panel_app(seeded, outbox, CollectorRegistry())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://vigil.test") as client:
        assert "secure" in attributes(await post_sign_in(client, "ana"))
    behind_proxy = ProxyHeadersMiddleware(app, trusted_hosts="10.0.0.1")
    forwarded = {"X-Forwarded-Proto": "https"}
    async with browser(behind_proxy, client=("10.0.0.1", 40000)) as client:  # type: ignore[arg-type]
        assert "secure" in attributes(await client.get("/login", headers=forwarded))
    async with browser(behind_proxy, client=("10.0.0.66", 40000)) as client:  # type: ignore[arg-type]
        # Not from the proxy: the header is not believed.
        assert "secure" not in attributes(await client.get("/login", headers=forwarded))


async def test_a_cookie_is_taken_by_a_replica_with_the_same_secret_and_refused_by_one_with_another(
    seeded: CaseStore, second_replica: CaseStore, outbox: MemoryOutbox, registry
):  # type: ignore[no-untyped-def]
    first = panel_app(seeded, outbox, registry, session_secret=SECRET)
    same = panel_app(second_replica, outbox, CollectorRegistry(), session_secret=SECRET)
    other = panel_app(second_replica, outbox, CollectorRegistry(), session_secret="another-secret")
    async with browser(first) as client:
        cookie, _ = session_cookie(await post_sign_in(client, "ana"))
    async with browser(same, cookie) as client:
        assert (await client.get("/api/whoami")).json()["name"] == "ana"
    async with browser(other, cookie) as client:
        assert (await client.get("/api/whoami")).status_code == 401
        page = await client.get("/panel", headers={"Accept": "text/html"})
        assert page.status_code == 303 and page.headers["location"].startswith("/login")


async def test_a_cookie_replayed_after_sign_out_is_refused_on_every_replica(
    seeded: CaseStore, second_replica: CaseStore, outbox: MemoryOutbox, registry
):  # type: ignore[no-untyped-def]
    first = panel_app(seeded, outbox, registry, session_secret=SECRET)
    second = panel_app(second_replica, outbox, CollectorRegistry(), session_secret=SECRET)
    async with browser(first) as client:
        csrf = await sign_in(client, "ana")
        cookie = client.cookies[SESSION_COOKIE]
        async with browser(second, cookie) as copy:
            assert (await copy.get("/api/whoami")).status_code == 200
        signed_out = await client.post("/logout", data={"csrf_token": csrf}, follow_redirects=False)
        assert signed_out.status_code == 303
    for replica in (first, second):
        async with browser(replica, cookie) as replay:
            assert (await replay.get("/api/whoami")).status_code == 401
            page = await replay.get("/panel", headers={"Accept": "text/html"})
            assert page.status_code == 303 and page.headers["location"].startswith("/login")


async def test_an_admin_signs_a_person_out_of_every_browser_on_every_replica(
    seeded: CaseStore, second_replica: CaseStore, outbox: MemoryOutbox, registry
):  # type: ignore[no-untyped-def]
    first = panel_app(seeded, outbox, registry, session_secret=SECRET)
    second = panel_app(second_replica, outbox, CollectorRegistry(), session_secret=SECRET)
    async with browser(first) as laptop, browser(second) as phone, browser(second) as admin:
        await sign_in(laptop, "ana")
        await sign_in(phone, "ana")
        lee_csrf = await sign_in(admin, "lee")
        revoke = {"user": "ana"}
        # Below admin, nobody may: not ana herself, not a lead, with a bearer token or a cookie and its CSRF token; nor
        # an admin of one tenant (ana's sessions are not only that tenant's business).
        for headers in (bearer("ana"), bearer("lee"), {"X-CSRF-Token": lee_csrf}, bearer("ada")):
            assert (await admin.post("/api/sessions/revoke", json=revoke, headers=headers)).status_code == 403
        for still in (laptop, phone):
            assert (await still.get("/api/whoami")).status_code == 200
        async with browser(first) as root_browser:
            root_csrf = await sign_in(root_browser, "root")
            # An admin's cookie needs the CSRF token like every other change.
            unguarded = await root_browser.post("/api/sessions/revoke", json=revoke)
            assert unguarded.status_code == 403
            assert (await laptop.get("/api/whoami")).status_code == 200
            answer = await root_browser.post("/api/sessions/revoke", json=revoke, headers={"X-CSRF-Token": root_csrf})
        assert answer.status_code == 200 and answer.json() == {"user": "ana", "sessions": 2}
        for gone in (laptop, phone):
            assert (await gone.get("/api/whoami")).status_code == 401
        assert (await admin.get("/api/whoami")).json()["name"] == "lee"  # only ana's sessions ended
        by_script = await admin.post("/api/sessions/revoke", json={"user": "lee"}, headers=bearer("root"))
        assert by_script.json() == {"user": "lee", "sessions": 1}
        assert (await admin.get("/api/whoami")).status_code == 401
        # Revoking does not lock anyone out: they sign in again.
        await sign_in(laptop, "ana")
        assert (await laptop.get("/api/whoami")).json()["name"] == "ana"


async def test_a_session_ends_at_its_max_age_however_active(seeded: CaseStore, outbox: MemoryOutbox, registry):  # type: ignore[no-untyped-def]
    clock = ManualClock(datetime.now(UTC))
    async with browser(panel_app(seeded, outbox, registry, clock, session_max_age_s=600)) as client:
        await sign_in(client, "ana")
        clock.advance(599)
        assert (await client.get("/api/whoami")).status_code == 200
        clock.advance(2)
        assert (await client.get("/api/whoami")).status_code == 401


@pytest.mark.usefixtures("restored_logging")
async def test_vigil_sessions_revoke_signs_a_person_out_of_every_browser(
    seeded: CaseStore, db_url: str, outbox: MemoryOutbox, registry, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):  # type: ignore[no-untyped-def]
    app = panel_app(seeded, outbox, registry)
    async with browser(app) as ana, browser(app) as lee:
        await sign_in(ana, "ana")
        await sign_in(lee, "lee")
        for name in [name for name in os.environ if name.startswith("VIGIL_")]:
            monkeypatch.delenv(name)
        monkeypatch.chdir(tmp_path)  # no .env of the developer's
        monkeypatch.setenv("VIGIL_DATABASE__URL", db_url)
        # The command runs its own event loop, as from a shell: in a thread of its own here.
        assert await asyncio.to_thread(main, ["sessions", "revoke", "ana"]) == 0
        assert (await ana.get("/api/whoami")).status_code == 401
        assert (await lee.get("/api/whoami")).json()["name"] == "lee"


@contextlib.asynccontextmanager
async def served(app: FastAPI) -> AsyncIterator[str]:
    """``app`` served by uvicorn on a free loopback port (a live stream needs a real server); its base URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    server = EmbeddedServer(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off"))
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    await wait_for(lambda: server.started or serving.done(), 10)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.should_exit = True
        await serving
        listener.close()


async def test_a_live_stream_ends_once_its_session_is_revoked(seeded: CaseStore, outbox: MemoryOutbox, registry):  # type: ignore[no-untyped-def]
    clock, feed = ManualClock(datetime.now(UTC)), LiveFeed()
    update = Update("message", "acme", "acme-1", {"text": "still there?"})
    received: list[str] = []
    app = panel_app(seeded, outbox, registry, clock, feed)
    async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
        await sign_in(client, "ana")

        async def watch() -> None:
            async with client.stream("GET", "/api/live") as stream:
                assert stream.status_code == 200
                async for kind, _ in sse_events(stream):
                    received.append(kind)

        watching = asyncio.create_task(watch())
        await wait_for(lambda: received == ["hello"], 10)
        clock.advance(LIVE_RECHECK_S)
        feed.publish(update)  # still signed in: it arrives
        await wait_for(lambda: received == ["hello", "message"], 10)
        revoked = await client.post("/api/sessions/revoke", json={"user": "ana"}, headers=bearer("root"))
        assert revoked.json()["sessions"] == 1
        clock.advance(LIVE_RECHECK_S)
        feed.publish(update)
        await asyncio.wait_for(watching, 10)  # the server ended the stream
    assert received == ["hello", "message"]


# ---- a conversation page holds one page; earlier ones come by the cursor; drafts are labelled ----
async def test_a_long_conversation_page_holds_the_newest_page_and_a_way_to_earlier_ones(
    seeded: CaseStore,
    outbox: MemoryOutbox,
    registry,  # type: ignore[no-untyped-def]
):
    from vigil.cases.paging import DEFAULT_PAGE

    total = DEFAULT_PAGE + 5
    for n in range(total):
        await say(seeded, "acme-long", "acme", n, f"message {n}")
    async with panel_client(seeded, outbox, registry) as client:
        page = await client.get("/panel/conversations/acme-long", headers=bearer("ana"))
        short = await client.get("/panel/conversations/acme-1", headers=bearer("ana"))
        embedded = re.search(r'<script id="vigil-data" type="application/json">(.*?)</script>', page.text, re.S)
        assert page.status_code == 200 and embedded
        data = json.loads(embedded.group(1))
        assert [m["text"] for m in data["messages"]] == [f"message {n}" for n in range(total - 1, 4, -1)]
        button = re.search(r'<button[^>]*id="earlier"[^>]*>Show earlier messages</button>', page.text)
        assert button and " hidden" not in button.group(0)
        assert re.search(r'<button[^>]*id="earlier"[^>]*hidden[^>]*>', short.text)  # nothing earlier to show

        # What the control fetches: the rest, and no cursor after it.
        api = f"/api/conversations/acme-long?before={data['older']}"
        rest = (await client.get(api, headers=bearer("ana"))).json()
        assert [m["text"] for m in rest["messages"]] == [f"message {n}" for n in range(4, -1, -1)]
        assert rest["older"] is None
        small = (await client.get("/api/conversations/acme-long?limit=2", headers=bearer("ana"))).json()
        assert len(small["messages"]) == 2 and small["older"]
        for bad in ("limit=0", "limit=501", "before=garbage"):
            answer = await client.get(f"/api/conversations/acme-long?{bad}", headers=bearer("ana"))
            assert answer.status_code == 422, bad
        # A cursor is no key to another tenant's conversation.
        other = await client.get(f"/api/conversations/globex-1?before={data['older']}", headers=bearer("ana"))
        assert other.status_code == 404


async def test_a_drafted_suggestion_is_labelled_as_machine_written_on_its_card(
    seeded: CaseStore,
    outbox: MemoryOutbox,
    registry,  # type: ignore[no-untyped-def]
):
    from vigil.wire.events import DRAFT_MARK

    drafted = Suggestion(
        suggestion_id="s-drafted",
        conversation_id="acme-1",
        tenant="acme",
        in_reply_to="acme-1-m1",
        created_at=NOW,
        kind="answer",
        text="Your bill is taken on the 1st [billing-dates].",
        why=f"{DRAFT_MARK}: billing-dates",
        confidence=0.8,
        latency_ms=900.0,
    )
    await seeded.save_suggestion(drafted)
    async with panel_client(seeded, outbox, registry) as client:
        page = await client.get("/panel/conversations/acme-1", headers=bearer("ana"))
        script = (await client.get("/panel/static/panel.js")).text
    # The card list carries the mark, and the script labels the cards whose why begins with it, as a note.
    assert f'data-draft-mark="{DRAFT_MARK}"' in page.text and DRAFT_MARK == "Drafted by AI from the sources"
    embedded = re.search(r'<script id="vigil-data" type="application/json">(.*?)</script>', page.text, re.S)
    assert embedded
    whys = {s["suggestion_id"]: s["why"] for s in json.loads(embedded.group(1))["suggestions"]}
    assert whys["s-drafted"].startswith(DRAFT_MARK) and not whys["s-acme"].startswith(DRAFT_MARK)
    assert "cards.dataset.draftMark" in script and 'class: "drafted", role: "note", text: draftMark' in script


# ---- a knowledge source: Markdown rendered, then sanitised; its title and section, never a path on the server ----
HOSTILE_ARTICLE = """---
id: hub-lights
title: What the lights on your Hub mean
product: home_broadband
---
The Hub has one light. A **solid amber** light means no fibre signal; see [the help centre](https://help.example/hub).

## Solid amber light

- Check the fibre cable
- Look at the light on the wall box

1. Switch it off
2. Switch it on

<script>window.pwned = 1</script>
<img src="x" onerror="window.pwned = 2">
<p style="color: red" onmouseover="window.pwned = 3">Styled</p>
[a markdown link](javascript:window.pwned=4) and <a href="javascript:window.pwned=5">a raw one</a>
"""


class Elements(HTMLParser):
    """The elements of an HTML fragment: (tag, attributes, text directly inside)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None], list[str]]] = []
        self.open: list[int] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs), []))
        self.open.append(len(self.found) - 1)

    def handle_endtag(self, tag: str) -> None:
        if self.open:
            self.open.pop()

    def handle_data(self, data: str) -> None:
        if self.open:
            self.found[self.open[-1]][2].append(data)

    def text_of(self, tag: str) -> list[str]:
        return ["".join(text).strip() for t, _, text in self.found if t == tag]


async def knowledge_page(store: CaseStore, outbox: MemoryOutbox, registry, embedder, tmp_path: Path) -> str:  # type: ignore[no-untyped-def]
    article = tmp_path / "help" / "articles" / "hub-lights.md"
    article.parent.mkdir(parents=True)
    article.write_text(HOSTILE_ARTICLE, encoding="utf-8")
    knowledge = await open_knowledge(store, tmp_path / "chroma", embedder)
    await knowledge.upsert(read(article))
    app = panel_app(store, outbox, registry, knowledge=knowledge)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://vigil.test") as client:
        answer = await client.get("/panel/knowledge/hub-lights", headers=bearer("ana"))
    assert answer.status_code == 200 and "script-src 'self'" in answer.headers["content-security-policy"]
    return answer.text


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_knowledge_page_renders_the_articles_markdown(
    store: CaseStore, outbox: MemoryOutbox, registry, embedder, tmp_path: Path
):  # type: ignore[no-untyped-def]
    page = await knowledge_page(store, outbox, registry, embedder, tmp_path)
    body = re.search(r'<div class="body" id="entry-body">(.*?)</div>', page, re.S)
    assert body and "**" not in body.group(1)
    elements = Elements()
    elements.feed(body.group(1))
    assert elements.text_of("strong") == ["solid amber"]
    assert elements.text_of("h2") == ["Solid amber light"]  # the page's h1 is the title
    assert elements.text_of("li") == [
        "Check the fibre cable",
        "Look at the light on the wall box",
        "Switch it off",
        "Switch it on",
    ]
    assert [t for t, _, _ in elements.found if t in ("ul", "ol")] == ["ul", "ol"]
    links = [attrs for t, attrs, _ in elements.found if t == "a"]
    assert links[0]["href"] == "https://help.example/hub" and links[0]["rel"] == "noopener noreferrer"
    # The title and the section (the product) head the page.
    assert re.search(r"<h1>What the lights on your Hub mean</h1>", page)
    assert re.search(r'data-part="section">Help article · Home broadband</p>', page)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_knowledge_page_removes_scripts_handlers_styles_and_javascript_links(
    store: CaseStore, outbox: MemoryOutbox, registry, embedder, tmp_path: Path
):  # type: ignore[no-untyped-def]
    page = await knowledge_page(store, outbox, registry, embedder, tmp_path)
    body = re.search(r'<div class="body" id="entry-body">(.*?)</div>', page, re.S)
    assert body
    elements = Elements()
    elements.feed(body.group(1))
    tags = {t for t, _, _ in elements.found}
    assert not tags & {"script", "img", "style", "iframe"}, tags
    attributes = {name for _, attrs, _ in elements.found for name in attrs}
    assert not {a for a in attributes if a.startswith("on")} and "style" not in attributes, attributes
    values = [value or "" for _, attrs, _ in elements.found for value in attrs.values()]
    assert not [v for v in values if "javascript" in v.lower()], values  # both links lose their target
    assert "window.pwned = 1" not in page  # a script's content goes with it
    assert "Styled" in elements.text_of("p")


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_knowledge_page_names_its_file_but_no_folder_on_the_server(
    store: CaseStore, outbox: MemoryOutbox, registry, embedder, tmp_path: Path
):  # type: ignore[no-untyped-def]
    page = await knowledge_page(store, outbox, registry, embedder, tmp_path)
    assert str(tmp_path) not in page and "/help/articles" not in page
    assert '<span class="mono">hub-lights.md</span>' in page


# ---- the queue's rows over the API -------------------------------------------------------------------------


async def test_the_queue_api_names_the_customer_and_previews_the_last_message(
    seeded: CaseStore, client: httpx.AsyncClient
):
    await say(seeded, "acme-1", "acme", 2, "Sorry, who is this?", role="analyst")
    raw = {"type": "message", "schema_version": 1, "message_id": "acme-1-m3", "conversation_id": "acme-1"}
    raw |= {"tenant": "acme", "sent_at": NOW.isoformat(), "role": "customer", "author": "Ada Lovelace"}
    await seeded.record(
        parse(json.dumps({**raw, "text": "x" * 300}).encode(), max_event_bytes=1 << 20, max_text_bytes=1 << 16)
    )
    [row] = (await client.get("/api/queue", headers=bearer("ana"))).json()
    assert row["customer_name"] == "Ada Lovelace"
    assert row["last_message"] == {
        "role": "customer",
        "text": "x" * 140 + "…",
        "sent_at": NOW.isoformat().replace("+00:00", "Z"),
    }
    assert (row["assignee"], row["priority"]) == (None, None)


# CSRF before anything else, and the local script the no-auth loopback panel lets in ------------------------------


async def test_a_session_request_without_its_csrf_token_learns_nothing_about_the_body(client: httpx.AsyncClient):
    csrf = await sign_in(client, "ana")
    for url, body in (
        ("/api/conversations/acme-1/read", {"through": 5}),
        ("/api/conversations/acme-1/read", {}),
        ("/api/suggestions/s-acme/feedback", {"verdict": "meh"}),
        ("/api/sessions/revoke", {"user": ""}),
    ):
        answer = await client.post(url, json=body)
        assert answer.status_code == 403 and answer.json() == {"detail": "missing or wrong CSRF token"}, url
    garbled = await client.post("/api/suggestions/s-acme/feedback", content=b"{not json", headers={"X-CSRF-Token": "x"})
    assert garbled.status_code == 403
    # With the token, the same bodies are validated.
    read = await client.post("/api/conversations/acme-1/read", json={"through": 5}, headers={"X-CSRF-Token": csrf})
    assert read.status_code == 422


async def test_a_local_script_may_post_to_the_no_auth_loopback_panel_and_a_browser_page_elsewhere_may_not(
    seeded: CaseStore, outbox: MemoryOutbox, registry
):  # type: ignore[no-untyped-def]
    url = "/api/suggestions/s-acme/feedback"
    async with panel_client(seeded, outbox, registry, "http://127.0.0.1:8080", auth="none", users=[]) as client:
        script = await client.post(url, json={"verdict": "accepted"})  # curl, a Python script: no cookie, no Origin
        assert script.status_code == 202 and len(outbox.submitted) == 1
        read = await client.post("/api/conversations/acme-1/read", json=through(NOW))
        assert read.status_code == 204
        # What a browser sends from a page on another site (its Origin; or a form's "null"; or Sec-Fetch-Site).
        for headers in (
            {"Origin": "https://evil.example"},
            {"Origin": "null"},
            {"Sec-Fetch-Site": "cross-site"},
            {"Referer": "https://evil.example/page"},
        ):
            answer = await client.post(url, json={"verdict": "accepted"}, headers=headers)
            assert answer.status_code == 403, headers
        # A browser that has the panel open carries its cookie: it needs the CSRF token, as ever.
        page = await client.get("/panel")
        assert page.status_code == 200 and client.cookies.get(SESSION_COOKIE)
        assert (await client.post(url, json={"verdict": "accepted"})).status_code == 403
        # A DNS-rebinding page names its own host, and is nobody, script-like or not.
        rebound = await client.post(url, json={"verdict": "accepted"}, headers={"Host": "evil.example:8080"})
        assert rebound.status_code == 401
    assert len(outbox.submitted) == 1


# ---- the lead overview in a browser, as a newcomer sees it a few minutes into the demo ----

LAPTOPS = ({"width": 1366, "height": 768}, {"width": 1280, "height": 800})
EFFECTIVE_FONT_PX = """() => [...document.querySelectorAll("figure svg text")].map(
    (t) => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a)"""
BAR_BUCKETS = """() => new Set(
    [...document.querySelectorAll("svg[aria-labelledby^='overview-verdicts-all'] rect title")]
        .map((t) => t.textContent)
        .filter((tip) => tip.startsWith("shown, "))
        .map((tip) => tip.split(": ")[0])).size"""


async def a_few_minutes_of_traffic(store: CaseStore, minutes: int = 6, tenant: str = "acme") -> None:
    """A conversation a minute for the last few minutes, each with a suggestion; four of them judged."""
    now = datetime.now(UTC)
    verdicts = ["accepted", "edited", "accepted", "dismissed"]
    for i in range(minutes):
        at, conversation = now - timedelta(minutes=minutes - i, seconds=-5), f"{tenant}-demo-{i}"
        message = {"message_id": f"{conversation}-m1", "conversation_id": conversation, "tenant": tenant}
        await store.record(Message(type="message", schema_version=1, **message, sent_at=at, role="customer", text="hi"))
        await suggest(store, conversation, tenant, f"s-{tenant}-demo-{i}", made=at + timedelta(seconds=2))
        if i < len(verdicts):
            judged = {"suggestion_id": f"s-{tenant}-demo-{i}", "conversation_id": conversation, "verdict": verdicts[i]}
            at_ = at + timedelta(seconds=20)
            await store.record(
                Feedback(type="feedback", schema_version=1, feedback_id=f"f-{tenant}-{i}", **judged, at=at_)
            )


async def test_a_fresh_demo_opens_the_overview_on_a_window_it_fills_legibly_with_counts_beside_rates(
    store: CaseStore, outbox: MemoryOutbox, registry
):  # type: ignore[no-untyped-def]
    await a_few_minutes_of_traffic(store)
    app = panel_app(store, outbox, registry, auth="none", users=[])
    async with served(app) as url, chromium() as browser:
        for viewport in LAPTOPS:
            page = await browser.new_page(viewport=viewport)
            await page.goto(url + "/panel/overview")
            # The last 15 minutes in 15 s, marked as the window shown: the six minutes fill six buckets, not one bar.
            current = page.locator("nav.windows a[aria-current='page']")
            assert await current.inner_text() == "Last 15m"
            assert await page.evaluate(BAR_BUCKETS) == 6
            # Every piece of chart text is drawn at 12 CSS px or more, after the SVG is scaled to its column.
            sizes = await page.evaluate(EFFECTIVE_FONT_PX)
            assert sizes and min(sizes) >= 12, (viewport, min(sizes))
            # A rate says what it counts: in the totals, the table by kind and the charts' legends.
            totals = await page.get_by_role("list", name="Totals for the window").inner_text()
            assert "50% (2 of 4)\nof answers judged, accepted as is" in totals, totals  # answers', not approvals
            learning = await page.get_by_role("list", name="Learning from resolved cases").inner_text()
            assert "cases mined" in learning and "answers drawn from mined knowledge" in learning
            assert "50% (2 of 4)" in await page.locator("table.by-kind").inner_text()
            legends = page.locator("svg[aria-labelledby^='overview-rates-answer'] text")
            assert "accepted: 50% (2 of 4)" in await legends.all_text_contents()
            await page.close()
        # A window asked for is the one shown.
        page = await browser.new_page(viewport=LAPTOPS[0])
        await page.goto(url + "/panel/overview?window=7d")
        assert await page.locator("nav.windows a[aria-current='page']").inner_text() == "Last 7d"


def current_window(page: httpx.Response) -> str:
    found = re.findall(r'<a href="/panel/overview\?window=(\w+)" aria-current="page">', page.text)
    assert page.status_code == 200 and len(found) == 1, found
    return found[0]


async def test_the_overview_opens_on_the_window_that_fits_the_viewers_own_data(
    store: CaseStore, outbox: MemoryOutbox, registry
):  # type: ignore[no-untyped-def]
    # Globex's conversations are minutes old; acme had one 3 days ago, which globex's lead never sees.
    await a_few_minutes_of_traffic(store, tenant="globex")
    old = datetime.now(UTC) - timedelta(days=3)
    message = {"message_id": "acme-old-m1", "conversation_id": "acme-old", "tenant": "acme", "role": "customer"}
    await store.record(Message(type="message", schema_version=1, **message, sent_at=old, text="hello?"))
    async with panel_client(store, outbox, registry) as client:
        lee = await client.get("/panel/overview", headers=bearer("lee"))
        assert current_window(lee) == "15m" and "the shortest window that holds all the data" in lee.text
        assert current_window(await client.get("/panel/overview", headers=bearer("root"))) == "7d"
        # A window asked for is kept, and not explained away.
        asked = await client.get("/panel/overview?window=30d", headers=bearer("lee"))
        assert current_window(asked) == "30d" and "shortest window" not in asked.text
        assert current_window(await client.get("/panel/overview?window=nonsense", headers=bearer("lee"))) == "15m"


async def test_with_nothing_to_count_the_overview_opens_on_the_last_day(
    store: CaseStore, outbox: MemoryOutbox, registry
):  # type: ignore[no-untyped-def]
    async with panel_client(store, outbox, registry) as client:
        page = await client.get("/panel/overview", headers=bearer("root"))
    assert current_window(page) == "24h" and "nothing to count yet" in page.text


DISPLAYS = {
    "acme": {"locale": "en-US", "time_zone": "America/New_York"},
    "globex": {"locale": "en-GB", "time_zone": "Europe/London"},
}


def body_display(page: httpx.Response) -> tuple[str, str]:
    found = re.search(r'<body [^>]*data-locale="([^"]+)" data-time-zone="([^"]+)"', page.text)
    assert found, page.text[:400]
    return found.group(1), found.group(2)


async def test_pages_carry_the_tenants_locale_and_time_zone_to_the_browser(
    seeded: CaseStore, outbox: MemoryOutbox, registry
):  # type: ignore[no-untyped-def]
    async with panel_client(seeded, outbox, registry, tenant_display=DISPLAYS, time_zone="Asia/Tokyo") as client:
        # A conversation is shown as its tenant reads time, whoever looks at it.
        assert body_display(await client.get("/panel/conversations/globex-1", headers=bearer("root"))) == (
            "en-GB",
            "Europe/London",
        )
        assert body_display(await client.get("/panel/conversations/acme-1", headers=bearer("ana"))) == (
            "en-US",
            "America/New_York",
        )
        queue = await client.get("/panel", headers=bearer("ana"))
        assert body_display(queue) == ("en-US", "America/New_York")  # the person's first tenant
        found = re.search(r'<script id="vigil-displays" type="application/json">(.*?)</script>', queue.text, re.S)
        assert found
        # Each row by its tenant; the browser learns only the tenants this person may see.
        assert json.loads(found.group(1)) == {
            "default": {"locale": "en-GB", "time_zone": "Asia/Tokyo"},
            "tenants": {"acme": DISPLAYS["acme"]},
        }
        everyone = await client.get("/panel", headers=bearer("root"))
        assert body_display(everyone) == ("en-GB", "Asia/Tokyo")  # every tenant: the default
        overview = await client.get("/panel/overview", headers=bearer("lee"))
        assert body_display(overview) == ("en-GB", "Europe/London")
        assert "Times in Europe/London" in overview.text
