"""The HTTP API: health, readiness, metrics (valid for promtool) and the conversation API."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import httpx
import jsonschema
import pytest

from tests.conftest import case_store, views_of
from vigil.app.health import Health
from vigil.cases.store import CaseStore
from vigil.core.clock import SystemClock
from vigil.core.errors import StoreUnavailable
from vigil.core.metrics import Metrics
from vigil.testing import panel_app
from vigil.wire.events import parse


def client_for(store: CaseStore, health: Health, metrics: Metrics) -> httpx.AsyncClient:
    app = panel_app(views=views_of(store), health=health, metrics=metrics)
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
        # A panel page is a page whoever asks (curl too), unless they ask for JSON alone.
        unknown = await client.get("/panel/conversations/unknown")
        assert unknown.status_code == 404 and unknown.headers["content-type"].startswith("text/html")
        assert "unknown conversation" in unknown.text and "Back to the queue" in unknown.text
        scripted = await client.get("/panel/conversations/unknown", headers={"Accept": "application/json"})
        assert scripted.json() == {"detail": "unknown conversation"}
        # A body that is not JSON text is a 400, as the API documents; JSON of the wrong shape, a 422.
        garbled = await client.post(
            "/api/suggestions/s-1/feedback", content=b'{"verdict": ', headers={"Content-Type": "application/json"}
        )
        assert garbled.status_code == 400 and garbled.json()["detail"].startswith("the body is not JSON text")
        wrong = await client.post("/api/suggestions/s-1/feedback", json={"verdict": "loved"})
        assert wrong.status_code == 422 and wrong.json()["detail"][0]["loc"] == ["body", "verdict"]


async def test_the_api_says_503_when_the_database_is_down(tmp_path, metrics: Metrics):
    from tests.conftest import make_settings

    settings = make_settings(tmp_path=tmp_path, db_url="postgresql+asyncpg://postgres@127.0.0.1:1/none")
    dead = case_store(settings)
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


# The contract: the OpenAPI says who may call each route, what it refuses with, and the shape of each refusal ------


async def record_message(store: CaseStore, conversation_id: str) -> None:
    raw = {
        "type": "message",
        "schema_version": 1,
        "message_id": f"{conversation_id}-m1",
        "conversation_id": conversation_id,
        "tenant": "acme",
        "sent_at": "2026-11-02T09:00:00Z",
        "role": "customer",
        "text": "When do you take the money?",
    }
    await store.record(parse(json.dumps(raw).encode(), max_event_bytes=1 << 20, max_text_bytes=1 << 16))


def conforms(spec: dict[str, object], component: str, body: object) -> None:
    """Checks ``body`` against a schema of the OpenAPI document (3.1: its schemas are JSON Schema 2020-12)."""
    schema = {"$ref": f"#/components/schemas/{component}", "components": spec["components"]}
    jsonschema.Draft202012Validator(schema).validate(body)


async def test_the_openapi_names_its_security_schemes_and_every_status_a_route_can_answer(
    store: CaseStore, metrics: Metrics
):
    health = Health({}, clock=SystemClock(), metrics=metrics, interval_s=1)
    async with client_for(store, health, metrics) as client:
        spec = (await client.get("/openapi.json")).json()
    schemes = spec["components"]["securitySchemes"]
    assert schemes["bearer"] == {"type": "http", "scheme": "bearer", "description": schemes["bearer"]["description"]}
    assert (schemes["session"]["in"], schemes["session"]["name"]) == ("cookie", "vigil_session")
    assert (schemes["csrf"]["in"], schemes["csrf"]["name"]) == ("header", "X-CSRF-Token")
    operations = {
        (method.upper(), path): operation
        for path, item in spec["paths"].items()
        if path.startswith("/api/")
        for method, operation in item.items()
    }
    store_backed = {
        "/api/queue",
        "/api/conversations",
        "/api/conversations/{conversation_id}",
        "/api/conversations/{conversation_id}/handover",
        "/api/conversations/{conversation_id}/audit",
    }
    for (method, path), operation in operations.items():
        statuses = set(operation["responses"])
        assert "401" in statuses, (method, path)
        if method == "POST":  # state-changing: a session needs its CSRF token with it
            assert operation["security"] == [{"bearer": []}, {"session": [], "csrf": []}], path
            assert {"403", "422", "503"} <= statuses, (method, path)
            if "requestBody" in operation:  # a body that is not JSON is refused
                assert "400" in statuses, (method, path)
        else:
            assert operation["security"] == [{"bearer": []}, {"session": []}], path
        if path in store_backed or method == "POST":
            assert "503" in statuses, (method, path)
        if "{conversation_id}" in path or "{suggestion_id}" in path or "{action_id}" in path:
            assert {"404", "422"} <= statuses, (method, path)
        for status in statuses - {"200", "202", "204", "422"}:
            error = operation["responses"][status]["content"]["application/json"]["schema"]
            assert error == {"$ref": "#/components/schemas/Error"}, (method, path, status)
    assert {method for method, _ in operations} == {"GET", "POST"} and len(operations) == 14


async def test_a_read_mark_takes_an_rfc_3339_date_time_with_its_zone_and_nothing_else(
    store: CaseStore, metrics: Metrics
):
    await record_message(store, "c-read")
    health = Health({}, clock=SystemClock(), metrics=metrics, interval_s=1)
    async with client_for(store, health, metrics) as client:
        spec = (await client.get("/openapi.json")).json()
        url = "/api/conversations/c-read/read"
        for through in (0, 1_700_000_000, "1700000000", "2026-11-02", "2026-11-02T09:00:00", "yesterday", None):
            answer = await client.post(url, json={"through": through})
            assert answer.status_code == 422, through
            conforms(spec, "HTTPValidationError", answer.json())
            assert answer.json()["detail"][0]["loc"] == ["body", "through"], through
        for through in ("2026-11-02T09:00:00Z", "2026-11-02T10:00:00.5+01:00"):
            assert (await client.post(url, json={"through": through})).status_code == 204, through


async def test_every_422_has_the_validation_error_shape_the_openapi_documents(store: CaseStore, metrics: Metrics):
    await record_message(store, "c-422")
    health = Health({}, clock=SystemClock(), metrics=metrics, interval_s=1)
    async with client_for(store, health, metrics) as client:
        spec = (await client.get("/openapi.json")).json()
        refusals = [
            await client.get("/api/conversations/c-422?before=no-page-gave-this"),  # raised by the route
            await client.get("/api/conversations?limit=0"),
            await client.post("/api/suggestions/s-1/feedback", json={"verdict": "edited", "text": " "}),
            await client.post("/api/suggestions/s-1/feedback", content=b"{not json"),
        ]
        for answer in refusals:
            assert answer.status_code == 422, answer.request.url
            conforms(spec, "HTTPValidationError", answer.json())
        assert refusals[0].json()["detail"][0]["loc"] == ["query", "before"]
        missing = await client.get("/api/conversations/no-such")
        assert missing.status_code == 404
        conforms(spec, "Error", missing.json())


async def test_each_path_names_the_methods_it_takes(store: CaseStore, metrics: Metrics):
    health = Health({}, clock=SystemClock(), metrics=metrics, interval_s=1)
    async with client_for(store, health, metrics) as client:
        # A conversation's id may hold slashes, so ".../read" is also a conversation to GET; POST marks it read.
        read = await client.options("/api/conversations/c-1/read")
        assert read.status_code == 405 and read.headers["allow"] == "GET, POST"
        conversation = await client.options("/api/conversations/c-1")
        assert conversation.status_code == 405 and conversation.headers["allow"] == "GET"
        feedback = await client.get("/api/suggestions/s-1/feedback")
        assert feedback.status_code == 405 and feedback.headers["allow"] == "POST"
        assert (await client.delete("/api/queue")).headers["allow"] == "GET"
