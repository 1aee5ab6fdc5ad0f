"""The actions API: a conversation lists its actions with where they stand; approving checks the caller's role,
the action's status, expiry and the arguments' hash at once and puts the decision on the stream; the audit log
reads, and nothing writes it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.cases.test_actions import record
from tests.panel.test_routes import NOW, bearer, panel_client, say
from vigil.cases import actions as stored
from vigil.cases.store import CaseStore
from vigil.transport.memory import MemoryOutbox
from vigil.wire.events import Feedback, parse


async def put(store: CaseStore, conversation: str, tenant: str, **changes: object) -> stored.ActionRecord:
    values: dict[str, object] = {
        "suggestion_id": f"s-{conversation}",
        # An hour from now, not from NOW (the module's import): the panel counts down on the real clock.
        "expires_at": datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1),
        **changes,
    }
    action = record(conversation, at=NOW, **values)  # type: ignore[arg-type]
    action.tenant = tenant
    async with store.engine.begin() as conn:
        await stored.insert(conn, action)
        await stored.append(conn, action, "suggested", at=NOW, actor="vigil")
    return action


@pytest.fixture
def outbox() -> MemoryOutbox:
    return MemoryOutbox()


@pytest.fixture
async def acted(store: CaseStore) -> CaseStore:
    await say(store, "acme-1", "acme", 1, "please refund ORD-1")
    await say(store, "globex-1", "globex", 1, "please refund ORD-1")
    await put(store, "acme-1", "acme", approver="analyst")
    await put(store, "globex-1", "globex", approver="lead", rule="large_refund_needs_lead")
    return store


@pytest.fixture
async def client(acted: CaseStore, outbox: MemoryOutbox, registry) -> AsyncIterator[httpx.AsyncClient]:  # type: ignore[no-untyped-def]
    async with panel_client(acted, outbox, registry) as c:
        yield c


async def test_a_conversation_lists_its_actions_with_what_would_run_and_the_rule(client: httpx.AsyncClient):
    page = (await client.get("/api/conversations/acme-1", headers=bearer("ana"))).json()
    [action] = page["actions"]
    assert action["name"] == "refund_order" and action["arguments"] == {"order_id": "ORD-1", "amount_cents": 1500}
    assert (action["status"], action["verdict"], action["rule"]) == (
        "suggested",
        "needs_approval",
        "refund_needs_approval",
    )
    assert len(action["arguments_hash"]) == 64


async def test_an_approval_goes_onto_the_stream_with_who_their_role_and_the_hash(
    client: httpx.AsyncClient, acted: CaseStore, outbox: MemoryOutbox
):
    action = (await client.get("/api/conversations/acme-1", headers=bearer("ana"))).json()["actions"][0]
    answer = await client.post(
        f"/api/actions/{action['action_id']}/approve",
        json={"arguments_hash": action["arguments_hash"]},
        headers=bearer("ana"),
    )
    assert answer.status_code == 202, answer.text
    [(tenant, conversation, value)] = outbox.submitted
    event = parse(value, max_event_bytes=1 << 20, max_text_bytes=1 << 16)
    assert isinstance(event, Feedback) and (tenant, conversation) == ("acme", "acme-1")
    assert (event.verdict, event.by, event.role, event.arguments_hash) == (
        "approved",
        "ana",
        "analyst",
        action["arguments_hash"],
    )
    assert (event.suggestion_id, event.action_id) == ("s-acme-1", action["action_id"])  # found by its id


async def test_approving_an_action_approved_whose_run_never_started_resumes_it_and_others_are_refused(
    acted: CaseStore,
    outbox: MemoryOutbox,
    registry,  # type: ignore[no-untyped-def]
):
    await say(acted, "acme-6", "acme", 1, "please refund ORD-1")
    await put(acted, "acme-5", "acme", approver="analyst", status="approved", amount=12)
    await put(acted, "acme-6", "acme", approver="analyst", status="in_doubt", amount=13)
    async with acted.engine.connect() as conn:
        [approved] = await stored.of_conversation(conn, "acme-5")
        [doubtful] = await stored.of_conversation(conn, "acme-6")
    async with panel_client(acted, outbox, registry) as client:
        body = {"arguments_hash": approved.arguments_hash}
        resumed = await client.post(f"/api/actions/{approved.action_id}/approve", json=body, headers=bearer("ada"))
        assert resumed.status_code == 202, resumed.text
        body = {"arguments_hash": doubtful.arguments_hash}
        settling = await client.post(f"/api/actions/{doubtful.action_id}/approve", json=body, headers=bearer("ada"))
        assert settling.status_code == 409 and "in_doubt" in settling.text  # the reconciler settles it, not people
        page = (await client.get("/api/conversations/acme-6", headers=bearer("ada"))).json()
    assert [a["status"] for a in page["actions"]] == ["in_doubt"]
    assert len(outbox.submitted) == 1


@pytest.mark.parametrize(
    ("who", "conversation", "hash_", "status", "problem"),
    [
        ("root", "globex-1", "0" * 64, 409, "arguments"),
        ("ana", "globex-1", None, 404, "unknown action"),  # another tenant's looks like none at all
        ("ada", "acme-1", None, 202, ""),
    ],
)
async def test_an_approval_that_cannot_be_taken_is_refused_at_once(
    client: httpx.AsyncClient,
    acted: CaseStore,
    who: str,
    conversation: str,
    hash_: str | None,
    status: int,
    problem: str,
):
    async with acted.engine.connect() as conn:
        [action] = await stored.of_conversation(conn, conversation)
    body = {"arguments_hash": hash_ or action.arguments_hash}
    answer = await client.post(f"/api/actions/{action.action_id}/approve", json=body, headers=bearer(who))
    assert answer.status_code == status, answer.text
    assert problem in answer.text


async def test_only_the_role_the_rule_names_may_approve_but_any_analyst_may_reject(
    acted: CaseStore,
    outbox: MemoryOutbox,
    registry,  # type: ignore[no-untyped-def]
):
    # A lead's action, seen by an analyst of its tenant.
    await put(acted, "acme-2", "acme", approver="lead", rule="large_refund_needs_lead", amount=9000)
    async with acted.engine.connect() as conn:
        [action] = await stored.of_conversation(conn, "acme-2")
    async with panel_client(acted, outbox, registry) as client:
        body = {"arguments_hash": action.arguments_hash}
        approve = await client.post(f"/api/actions/{action.action_id}/approve", json=body, headers=bearer("ana"))
        assert approve.status_code == 403 and "a lead approves" in approve.text
        reject = await client.post(f"/api/actions/{action.action_id}/reject", json=body, headers=bearer("ana"))
        assert reject.status_code == 202


async def test_an_expired_or_decided_action_is_refused(acted: CaseStore, outbox: MemoryOutbox, registry):  # type: ignore[no-untyped-def]
    await put(acted, "acme-3", "acme", approver="analyst", expires_at=NOW - timedelta(seconds=1), amount=10)
    await put(acted, "acme-4", "acme", approver="analyst", status="executed", amount=11)
    async with acted.engine.connect() as conn:
        [expired] = await stored.of_conversation(conn, "acme-3")
        [done] = await stored.of_conversation(conn, "acme-4")
    async with panel_client(acted, outbox, registry) as client:
        for action, problem in ((expired, "expired"), (done, "executed")):
            body = {"arguments_hash": action.arguments_hash}
            answer = await client.post(f"/api/actions/{action.action_id}/approve", json=body, headers=bearer("ada"))
            assert answer.status_code == 409 and problem in answer.text
    assert outbox.submitted == []


async def test_the_audit_log_reads_per_conversation_and_has_no_route_that_writes_it(client: httpx.AsyncClient):
    log = (await client.get("/api/conversations/acme-1/audit", headers=bearer("ana"))).json()
    assert [(e["step"], e["actor"]) for e in log] == [("suggested", "vigil")]
    assert (await client.get("/api/conversations/globex-1/audit", headers=bearer("ana"))).status_code == 404
    for method in ("PUT", "PATCH", "DELETE", "POST"):
        answer = await client.request(method, "/api/conversations/acme-1/audit", headers=bearer("ada"))
        assert answer.status_code in (404, 405), (method, answer.status_code)
