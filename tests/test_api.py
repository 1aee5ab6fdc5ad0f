"""The HTTP API: health, readiness, metrics (valid for promtool) and the conversation API."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import httpx
import pytest

from vigil.api import create_app
from vigil.clock import SystemClock
from vigil.errors import StoreUnavailable
from vigil.events import parse
from vigil.health import Health
from vigil.metrics import Metrics
from vigil.store import CaseStore


def client_for(store: CaseStore, health: Health, metrics: Metrics) -> httpx.AsyncClient:
    app = create_app(store=store, health=health, metrics=metrics)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8080"
    )  # no sign-in: loopback only


@pytest.fixture
def metrics(registry) -> Metrics:  # type: ignore[no-untyped-def]
    return Metrics(registry)


async def test_health_and_readiness_follow_the_checks(store: CaseStore, metrics: Metrics):
    broker_up = True

    async def broker() -> None:
        if not broker_up:
            raise StoreUnavailable("broker frozen")

    health = Health({"database": store.ping, "broker": broker}, clock=SystemClock(), metrics=metrics, interval_s=1)
    async with client_for(store, health, metrics) as client:
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/readyz")).status_code == 503  # nothing checked yet
        await health.check_once()
        assert (await client.get("/readyz")).json() == {"status": "ready"}
        broker_up = False
        await health.check_once()
        answer = await client.get("/readyz")
        assert answer.status_code == 503
        assert answer.json()["problems"] == {"broker": "broker frozen"}
        assert metrics.registry.get_sample_value("vigil_dependency_up", {"dependency": "broker"}) == 0


async def test_a_conversation_comes_back_with_messages_in_order(store: CaseStore, metrics: Metrics):
    for n, role in enumerate(["customer", "analyst", "customer"]):
        raw = json.dumps(
            {
                "type": "message",
                "schema_version": 1,
                "message_id": f"m{n}",
                "conversation_id": "c/1",
                "tenant": "acme",
                "sent_at": f"2026-11-02T09:00:0{n}Z",
                "role": role,
                "text": f"<b>{n}</b>",
            }
        ).encode()
        await store.record(parse(raw, max_event_bytes=1 << 20, max_text_bytes=1 << 16))
    health = Health({}, clock=SystemClock(), metrics=metrics, interval_s=1)
    async with client_for(store, health, metrics) as client:
        answer = await client.get("/api/conversations/c%2F1")
        assert answer.status_code == 200
        body = answer.json()
        assert (body["conversation_id"], body["tenant"], body["status"]) == ("c/1", "acme", "open")
        assert [m["message_id"] for m in body["messages"]] == ["m2", "m1", "m0"]  # newest first
        assert body["messages"][-1]["text"] == "<b>0</b>"
        assert body["suggestions"] == []
        listed = (await client.get("/api/conversations")).json()
        assert [(c["conversation_id"], c["message_count"]) for c in listed] == [("c/1", 3)]
        assert (await client.get("/api/conversations?limit=0")).status_code == 422
        assert (await client.get("/api/conversations/unknown")).status_code == 404
        # Paths and methods that do not exist get the same error handling: a page for browsers, JSON for the rest.
        missing = await client.get("/no/such/page", headers={"Accept": "text/html"})
        assert missing.status_code == 404 and missing.headers["content-type"].startswith("text/html")
        assert (await client.get("/no/such/page")).json() == {"detail": "Not Found"}


async def test_the_api_says_503_when_the_database_is_down(tmp_path, metrics: Metrics):
    from tests.conftest import make_settings

    settings = make_settings(tmp_path=tmp_path, db_url="postgresql+asyncpg://postgres@127.0.0.1:1/none")
    dead = CaseStore.from_settings(settings, clock=SystemClock())
    health = Health({}, clock=SystemClock(), metrics=metrics, interval_s=1)
    try:
        async with client_for(dead, health, metrics) as client:
            assert (await client.get("/api/conversations/c-1")).status_code == 503
            assert (await client.get("/api/conversations")).status_code == 503
            assert (await client.get("/api/queue")).status_code == 503
            # The pages too: a browser gets an error page that says so, not a bare 500.
            page = await client.get("/panel", headers={"Accept": "text/html"})
            assert page.status_code == 503 and "the case store is unavailable" in page.text
    finally:
        await dead.close()


async def test_metrics_are_valid_prometheus_exposition(store: CaseStore, metrics: Metrics):
    metrics.events_consumed.labels("message").inc()
    metrics.events_dead_lettered.labels("invalid_json").inc()
    metrics.suggestions_published.labels("answer").inc()
    metrics.suggestion_latency.observe(0.02)
    metrics.event_processing.observe(0.003)
    health = Health({}, clock=SystemClock(), metrics=metrics, interval_s=1)
    async with client_for(store, health, metrics) as client:
        answer = await client.get("/metrics")
    text = answer.text
    for name in (
        'vigil_events_consumed_total{type="message"} 1.0',
        'vigil_events_dead_lettered_total{reason="invalid_json"} 1.0',
        'vigil_suggestions_published_total{kind="answer"} 1.0',
        "vigil_suggestion_latency_seconds_bucket",
        "vigil_event_processing_seconds_bucket",
    ):
        assert name in text
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing in CI (make test installs it into .tools/bin)")
        pytest.skip("promtool not installed (make test installs it)")
    check = subprocess.run([promtool, "check", "metrics"], input=answer.content, capture_output=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr


async def test_the_openapi_document_describes_the_api(store: CaseStore, metrics: Metrics):
    health = Health({}, clock=SystemClock(), metrics=metrics, interval_s=1)
    async with client_for(store, health, metrics) as client:
        spec = (await client.get("/openapi.json")).json()
    assert {"/healthz", "/readyz", "/metrics", "/api/conversations/{conversation_id}"} <= set(spec["paths"])
