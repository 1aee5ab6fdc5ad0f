"""Approvals end to end over Kafka and HTTP: an action not approved within its window cannot be approved, a second
approval does nothing, an approval of other arguments is refused, a connector call that timed out after the system
committed it is retried under the same idempotency key, so the money moves once, and an approval through the API
goes through the stream."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.action_chat import PROOFS, Chat, Daemon, action_daemon
from tests.e2e.harness import eventually
from tests.e2e.shop import Order
from vigil.core.clock import SystemClock
from vigil.dev.broker import EmbeddedBroker
from vigil.wire.proof import Proofs

pytestmark = pytest.mark.e2e

TTL_S = 8.0
TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
async def daemon(kafka: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Daemon]:
    async with action_daemon(
        kafka,
        tmp_path_factory.mktemp("approvals"),
        timeout_s=str(TIMEOUT_S),
        VIGIL_ACTIONS__APPROVAL_TTL_S=str(TTL_S),
        VIGIL_ACTIONS__EXPIRY_EVERY_S="0.5",
    ) as running:
        yield running


def account(daemon: Daemon, n: int, total_cents: int = 8999) -> tuple[str, str]:
    """A customer of the test's own with one delivered order: (customer id, order id)."""
    customer, order = f"CUS-4{n:03d}", f"ORD-4{n:03d}1"
    daemon.shop.add_customer(customer, methods={f"PM-4{n:03d}0": {"kind": "card"}})
    daemon.shop.add_order(Order(order, customer, "delivered", total_cents, f"PM-4{n:03d}0"))
    return customer, order


async def refund_to_approve(
    daemon: Daemon, n: int, amount: str, *, rule: str, analyst: str = "ria"
) -> tuple[Chat, str, dict[str, Any]]:
    """A conversation in which the customer asked for a refund of ``amount``, the analyst (``analyst``) checked their
    identity and read it back, and the customer said yes: the action waits for its approval under ``rule``."""
    customer, order = account(daemon, n)
    chat = Chat(daemon, f"appr-{uuid.uuid4().hex[:8]}", customer)
    await daemon.send(
        [
            chat.message("customer", f"The item in {order} broke, please refund £{amount}"),
            chat.message("analyst", "Thanks, your identity is verified.", author=analyst),
            chat.message(
                "analyst", f"I can refund {amount} for {order} to your card. Shall I go ahead?", author=analyst
            ),
            chat.message("customer", "yes please"),
        ]
    )
    card = await daemon.card(chat.id, "refund_order", rule=rule)
    return chat, order, card


async def test_an_action_not_approved_within_its_window_expires_and_its_approval_is_refused(daemon: Daemon):
    chat, order, card = await refund_to_approve(daemon, 1, "30.00", rule="refund_needs_approval")
    await daemon.card(chat.id, "refund_order", status="expired")  # the sweep, once the window closed
    await daemon.send([chat.decision(card, "approved", by="lee", role="lead")])
    await daemon.processed()

    assert daemon.shop.refunds(order) == []
    assert [a["status"] for a in daemon.actions(chat.id)] == ["expired"]
    steps = [(step, actor) for step, actor, _, _ in daemon.audit(chat.id)]
    assert steps[-2:] == [("expired", "vigil"), ("refused", "lee")]


async def test_a_second_approval_of_the_same_action_does_not_run_it_again(daemon: Daemon):
    chat, order, card = await refund_to_approve(daemon, 2, "40.00", rule="refund_needs_approval")
    twice = [
        chat.decision(card, "approved", by="ana", role="analyst"),
        chat.decision(card, "approved", by="ben", role="analyst"),
    ]
    await daemon.send(twice)
    await daemon.card(chat.id, "refund_order", status="executed")
    await daemon.processed()

    assert daemon.shop.refunds(order) == [4000]
    steps = [(step, actor) for step, actor, _, _ in daemon.audit(chat.id)]
    assert steps.count(("approved", "ana")) == 1
    # Taken with ana's in one batch, ben's finds it approved and not yet run: it resumes it (which runs it once).
    assert ("refused", "ben") in steps or ("resumed", "ben") in steps
    assert ("approved", "ben") not in steps
    assert [step for step, _ in steps].count("executed") == 1


async def test_an_approval_of_other_arguments_than_the_suggested_is_refused(daemon: Daemon):
    chat, order, card = await refund_to_approve(daemon, 3, "20.00", rule="refund_needs_approval")
    # The customer asks for more (not enough to make it a split refund): another action, with its own approval.
    await daemon.send([chat.message("customer", "actually make it a refund of £25 please")])
    larger = await daemon.card(chat.id, "refund_order", amount_cents=2500)
    assert larger["action_id"] != card["action_id"]

    # The lead's client signs what it was shown: the larger request's arguments, on the first action.
    stale = chat.decision(card | {"arguments_hash": larger["arguments_hash"]}, "approved", by="lee", role="lead")
    await daemon.send([stale])
    await daemon.processed()

    assert daemon.shop.refunds(order) == []
    assert {a["status"] for a in daemon.actions(chat.id)} == {"suggested"}
    refused = [d for step, actor, _, d in daemon.audit(chat.id) if step == "refused" and actor == "lee"]
    assert [d["reason"] for d in refused] == ["arguments_changed"]


async def test_a_connector_that_times_out_after_committing_is_retried_once_and_the_refund_is_made_once(
    daemon: Daemon,
):
    chat, order, card = await refund_to_approve(daemon, 4, "25.00", rule="refund_needs_approval")
    await daemon.processed()  # no lookup in flight: the next request to the systems is the refund
    path = f"POST /orders/{order}/refunds"
    daemon.shop.faults.delay_after_commit_s = TIMEOUT_S * 3
    daemon.shop.faults.delay_count = 1
    approve = chat.decision(card, "approved", by="ana", role="analyst")
    await daemon.send([approve])
    done = await daemon.card(chat.id, "refund_order", status="executed")

    assert daemon.shop.refunds(order) == [2500]
    assert daemon.shop.faults.requests.count(path) == 2  # the call that timed out, and its replayed retry
    assert done["attempts"] == 1
    steps = [step for step, _, _, _ in daemon.audit(chat.id)]
    assert steps.count("executing") == 1 and steps.count("executed") == 1
    await eventually("the late answer sent", lambda: daemon.shop.faults.delay_count == 0, 5)


async def test_an_approval_from_the_panel_needs_the_role_the_rule_names(daemon: Daemon, tmp_path: Path):
    chat, order, card = await refund_to_approve(daemon, 5, "89.99", rule="large_refund_needs_lead")
    analyst = chat.decision(card, "approved", by="ana", role="analyst")
    lead = chat.decision(card, "approved", by="lee", role="lead")
    await daemon.send([analyst, lead])
    await daemon.card(chat.id, "refund_order", status="executed")
    assert daemon.shop.refunds(order) == [8999]
    steps = [(step, actor) for step, actor, _, _ in daemon.audit(chat.id)]
    assert ("refused", "ana") in steps and ("approved", "lee") in steps


async def test_an_approval_over_http_goes_through_the_stream_and_runs_the_action_once(daemon: Daemon):
    chat, order, card = await refund_to_approve(daemon, 6, "89.99", rule="large_refund_needs_lead")
    action = card["action_id"]
    base = daemon.process.base_url
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        # The panel on a loopback address without sign-in is the local admin.
        stale = await http.post(f"/api/actions/{action}/approve", json={"arguments_hash": "0" * 64})
        assert stale.status_code == 409 and "arguments" in stale.text
        approved = await http.post(f"/api/actions/{action}/approve", json={"arguments_hash": card["arguments_hash"]})
        assert approved.status_code == 202, approved.text
        await daemon.card(chat.id, "refund_order", status="executed")
        again = await http.post(f"/api/actions/{action}/approve", json={"arguments_hash": card["arguments_hash"]})
        assert again.status_code == 409 and "executed" in again.text
        listed = (await http.get(f"/api/conversations/{chat.id}")).json()["actions"]
        audit = (await http.get(f"/api/conversations/{chat.id}/audit")).json()
    assert [(a["action_id"], a["status"]) for a in listed] == [(action, "executed")]
    assert ("approved", "local", "admin") in [(e["step"], e["actor"], e["role"]) for e in audit]
    assert daemon.shop.refunds(order) == [8999]


def forged(chat: Chat, card: dict[str, Any], kind: str, other: dict[str, Any]) -> dict[str, Any]:
    """A decision on ``card`` that a producer on the input topic could write, of ``kind`` (``other``: another
    action waiting in another conversation, whose real approval is replayed)."""
    now = SystemClock().now()
    claims = {"action_id": card["action_id"], "conversation_id": chat.id, "tenant": card["tenant"], "by": "mallory"}
    if kind == "unsigned admin":
        return chat.feedback(
            card["suggestion_id"], "approved", action_id=card["action_id"], tenant=card["tenant"], by="mallory",
            role="admin", arguments_hash=card["arguments_hash"],
        )  # fmt: skip
    if kind == "unsigned lead without a hash":
        return chat.feedback(card["suggestion_id"], "approved", by="mallory", role="lead", tenant=card["tenant"])
    if kind == "signed without a hash":
        sent = chat.decision(card, "approved", by="mallory", role="lead")
        proof = PROOFS.sign(**claims, verdict="approved", role="lead", arguments_hash=None, now=now)
        return {k: v for k, v in sent.items() if k != "arguments_hash"} | {"proof": proof}
    if kind == "another key":
        proof = Proofs([b"mallory's own key, long enough to sign"]).sign(
            **claims, verdict="approved", role="admin", arguments_hash=card["arguments_hash"], now=now
        )
        return chat.decision(card, "approved", by="mallory", role="admin") | {"proof": proof}
    if kind == "expired":
        long_ago = now - timedelta(hours=2)
        proof = PROOFS.sign(
            **claims, verdict="approved", role="lead", arguments_hash=card["arguments_hash"], now=long_ago
        )
        return chat.decision(card, "approved", by="mallory", role="lead") | {"proof": proof}
    if kind == "another tenant's lead":
        proof = PROOFS.sign(
            **(claims | {"tenant": "globex"}), verdict="approved", role="lead", arguments_hash=card["arguments_hash"],
            now=now,
        )  # fmt: skip
        return chat.decision(card, "approved", by="mallory", role="lead") | {"proof": proof}
    if kind == "replayed for another action":
        real = chat.decision(other, "approved", by="lee", role="lead")  # lee's genuine approval of the other refund
        return chat.decision(card, "approved", by="lee", role="lead") | {"proof": real["proof"]}
    if kind == "replayed for other arguments":
        # A genuine approval of these arguments, sent again naming other ones (the attacker's own hash).
        return chat.decision(card, "approved", by="lee", role="lead") | {"arguments_hash": "0" * 64}
    if kind == "a role the signer does not hold":
        # ana's client signed her decision as an analyst; the event claims she is an admin.
        return chat.decision(card, "approved", by="ana", role="analyst") | {"role": "admin"}
    raise AssertionError(kind)


FORGERIES = (
    "unsigned admin", "unsigned lead without a hash", "signed without a hash", "another key", "expired",
    "another tenant's lead", "replayed for another action", "replayed for other arguments",
    "a role the signer does not hold",
)  # fmt: skip


async def test_a_decision_on_the_stream_is_believed_only_as_its_proof_says_and_forgeries_are_refused_and_audited(
    daemon: Daemon,
):
    waiting = [await refund_to_approve(daemon, 20 + n, "89.99", rule="large_refund_needs_lead") for n in range(10)]
    *targets, (other_chat, other_order, other) = waiting
    await daemon.send(
        [forged(chat, card, kind, other) for kind, (chat, _, card) in zip(FORGERIES, targets, strict=True)]
    )
    await daemon.processed()

    for kind, (chat, order, _card) in zip(FORGERIES, targets, strict=True):
        assert daemon.shop.refunds(order) == [], kind
        assert [a["status"] for a in daemon.actions(chat.id)] == ["suggested"], kind
        refused = [d["reason"] for step, _, _, d in daemon.audit(chat.id) if step == "refused"]
        assert refused == ["unproven"], (kind, daemon.audit(chat.id))
    # The genuine approval whose proof was replayed still counts where it belongs.
    await daemon.send([other_chat.decision(other, "approved", by="lee", role="lead")])
    await daemon.card(other_chat.id, "refund_order", status="executed")
    assert daemon.shop.refunds(other_order) == [8999]


async def test_the_analyst_who_read_a_refund_back_cannot_approve_it_but_a_second_analyst_can(daemon: Daemon):
    chat, order, card = await refund_to_approve(daemon, 30, "30.00", rule="refund_needs_approval", analyst="ria")
    await daemon.send([chat.decision(card, "approved", by="ria", role="analyst")])
    await daemon.processed()
    assert daemon.shop.refunds(order) == []
    refused = [(actor, d) for step, actor, _, d in daemon.audit(chat.id) if step == "refused"]
    assert [(actor, d["reason"]) for actor, d in refused] == [("ria", "same_person")]
    assert "ria proposed and read back this action; another person approves it" in refused[0][1]["detail"]

    await daemon.send([chat.decision(card, "approved", by="ben", role="analyst")])
    await daemon.card(chat.id, "refund_order", status="executed")
    assert daemon.shop.refunds(order) == [3000]
    steps = [(step, actor) for step, actor, _, _ in daemon.audit(chat.id)]
    assert ("approved", "ben") in steps
