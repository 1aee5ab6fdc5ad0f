"""Approvals and execution against the demo's systems over HTTP, on SQLite and PostgreSQL: an approval is kept with
its feedback event, an action runs exactly once or is visibly in doubt until the reconciler settles it, and nothing
(a crash after the call, a database error writing the result, a timeout, a rulebook reloaded without the action)
leaves an action stuck. A crash is a ``BaseException`` out of the call (nothing of vigil's catches it) followed by
a fresh ``Approvals`` on the same database, as a restarted process would build it; billing's own database says how
many refunds were made."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from tests.actions.systems import Shop
from vigil.actions import approvals as approvals_module
from vigil.actions.approvals import Approvals, Performer
from vigil.actions.catalog import ConnectorCall
from vigil.actions.connectors.http import Connectors
from vigil.actions.connectors.settings import SystemSettings
from vigil.actions.decisions import ApprovalKeeper
from vigil.actions.metrics import ActionMetrics
from vigil.actions.running import Running
from vigil.cases import actions as stored
from vigil.cases.actions import ActionRecord, action_id, arguments_hash
from vigil.cases.store import CaseStore
from vigil.core import faults
from vigil.core.clock import ManualClock, SystemClock
from vigil.core.metrics import Metrics
from vigil.core.retry import Backoff
from vigil.wire.events import Feedback, Message
from vigil.wire.proof import Proofs

T0 = datetime.now(UTC).replace(microsecond=0)
PROOFS = Proofs([b"tests/actions/test_approvals: the key"])
CLAIM_TIMEOUT_S = 60.0
REFUND = ConnectorCall(
    system="billing",
    method="POST",
    path="/orders/{order_id}/refunds",
    body=("amount_cents", "payment_method_id", "reason"),
)


@pytest.fixture
def billing(shop: Shop) -> Shop:
    return shop


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
async def connectors(billing: Shop) -> AsyncIterator[Connectors]:
    backoff = Backoff(SystemClock(), Metrics(CollectorRegistry()), initial_s=0.01, max_s=0.05)
    async with Connectors({"billing": SystemSettings(base_url=billing.url, timeout_s=5)}, backoff=backoff) as built:
        yield built


@pytest.fixture(autouse=True)
def disarmed() -> Iterator[None]:
    yield
    faults.configure("")


class Crash(BaseException):
    """The process dying right there: nothing of vigil's catches it."""


class CrashAfterCall:
    """Makes the call for real, then dies before its answer is back."""

    def __init__(self, performer: Performer) -> None:
        self._performer = performer

    async def perform(
        self, call: ConnectorCall, arguments: Mapping[str, Any], *, idempotency_key: str
    ) -> dict[str, Any]:
        await self._performer.perform(call, arguments, idempotency_key=idempotency_key)
        raise Crash


def approvals_on(
    store: CaseStore,
    clock: ManualClock,
    performer: Performer,
    *,
    calls: Any = None,
    registry: CollectorRegistry | None = None,
) -> Approvals:
    """An ``Approvals`` as a (re)started process builds it."""
    return Approvals(
        store.engine,
        clock=clock,
        performer=performer,
        calls=calls or (lambda tenant, name: REFUND),
        ttl_s=3600,
        timeout_s=10,
        claim_timeout_s=CLAIM_TIMEOUT_S,
        metrics=ActionMetrics(registry or CollectorRegistry()),
    )


def refund(conversation: str = "c-1", amount: int = 2000, **changes: Any) -> ActionRecord:
    arguments = {"order_id": "ORD-10001", "amount_cents": amount, "payment_method_id": "PM-5001", "reason": "broken"}
    digest = arguments_hash("refund_order", arguments)
    values: dict[str, Any] = {
        "action_id": action_id(conversation, digest, f"{conversation}-m1"), "conversation_id": conversation,
        "tenant": "acme", "name": "refund_order", "arguments": arguments, "arguments_hash": digest,
        "verdict": "needs_approval", "rule": "refund_needs_approval", "reason": "Refunds move money.",
        "status": "suggested", "suggested_at": T0, "customer_id": "CUS-1001", "amount_cents": amount,
        "approver": "lead", "expires_at": T0 + timedelta(hours=1), "suggestion_id": f"s-{conversation}",
    }  # fmt: skip
    return ActionRecord(**(values | changes))


async def approved(store: CaseStore, approvals: Approvals, record: ActionRecord) -> ActionRecord:
    """``record`` stored and approved by a lead, committed."""
    await approvals.record(record)
    async with store.engine.begin() as conn:
        decision = await approvals.decide(
            conn, record, approve=True, by="lee", role="lead", arguments_hash=record.arguments_hash
        )
    assert decision.refused is None
    return decision.record


async def now_of(store: CaseStore, action: str) -> ActionRecord:
    async with store.engine.connect() as conn:
        found = await stored.get(conn, action)
    assert found is not None
    return found


async def steps(store: CaseStore, conversation: str = "c-1") -> list[tuple[str, str]]:
    async with store.engine.connect() as conn:
        return [(e.step, e.actor) for e in await stored.audit_log(conn, conversation)]


# --- Reproduction 1: a crash between the call and the status write; the reconciler finishes it ---


async def test_a_crash_after_the_call_is_finished_by_the_reconciler_with_one_refund_in_billing(
    store: CaseStore, clock: ManualClock, connectors: Connectors, billing: Shop
):
    dying = approvals_on(store, clock, CrashAfterCall(Running(connectors)))
    record = await approved(store, dying, refund())
    with pytest.raises(Crash):
        await dying.execute(record)
    assert billing.refunds("ORD-10001") == [2000]  # the money moved
    assert (await now_of(store, record.action_id)).status == "executing"

    registry = CollectorRegistry()
    restarted = approvals_on(store, clock, Running(connectors), registry=registry)
    assert await restarted.reconcile() == []  # the claim has not lapsed: it may still be running somewhere
    clock.advance(CLAIM_TIMEOUT_S + 1)
    assert [r.status for r in await restarted.reconcile()] == ["executed"]

    done = await now_of(store, record.action_id)
    assert (done.status, done.attempts) == ("executed", 2)
    assert billing.refunds("ORD-10001") == [2000]  # billing replayed the re-sent call: one refund
    assert await steps(store) == [
        ("suggested", "vigil"), ("approved", "lee"), ("executing", "vigil"), ("executing", "vigil"),
        ("executed", "vigil"),
    ]  # fmt: skip
    assert registry.get_sample_value("vigil_actions_reconciled_total", {"was": "executing", "now": "executed"}) == 1
    assert await restarted.reconcile() == []  # settled: nothing more to do


# --- Reproduction 2: a database error writing the result is retried in execute, never thrown to the pipeline ---


async def test_a_database_error_writing_the_result_is_retried_and_the_action_is_executed_once(
    store: CaseStore, clock: ManualClock, connectors: Connectors, billing: Shop
):
    approvals = approvals_on(store, clock, Running(connectors))
    record = await approved(store, approvals, refund())
    faults.configure("action.after_call=db_error")

    done = await approvals.execute(record)  # raises nothing

    assert done.status == "executed"
    assert (await now_of(store, record.action_id)).status == "executed"
    assert billing.refunds("ORD-10001") == [2000]
    assert [s for s, _ in await steps(store)].count("executed") == 1


async def test_a_database_away_longer_than_the_retries_leaves_the_action_to_the_reconciler(
    store: CaseStore, clock: ManualClock, connectors: Connectors, billing: Shop, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(approvals_module, "WRITE_DELAYS_S", ())  # no retry: the first error is the last
    approvals = approvals_on(store, clock, Running(connectors))
    record = await approved(store, approvals, refund())
    faults.configure("action.after_call=db_error")

    left = await approvals.execute(record)  # raises nothing

    assert left.status == "executing" and billing.refunds("ORD-10001") == [2000]
    clock.advance(CLAIM_TIMEOUT_S + 1)
    assert [r.status for r in await approvals.reconcile()] == ["executed"]
    assert billing.refunds("ORD-10001") == [2000]


# --- Reproduction 3: an approval stored just before a crash is acted on ---


async def test_an_approval_is_kept_with_its_feedback_event_and_run_after_a_crash_before_the_skill(
    store: CaseStore, clock: ManualClock, connectors: Connectors, billing: Shop
):
    approvals = approvals_on(store, clock, Running(connectors))
    record = refund()
    await store.record(message("c-1"))
    await approvals.record(record)
    store.keep_with([ApprovalKeeper(approvals, PROOFS, clock)])

    await store.record(approval("c-1", record))  # committed; then vigil dies before the skill sees it

    kept = await now_of(store, record.action_id)
    assert (kept.status, kept.decided_by) == ("approved", "lee")
    assert billing.refunds("ORD-10001") == []
    restarted = approvals_on(store, clock, Running(connectors))
    clock.advance(CLAIM_TIMEOUT_S + 1)
    assert [r.status for r in await restarted.reconcile()] == ["executed"]
    assert (await now_of(store, record.action_id)).status == "executed"
    assert billing.refunds("ORD-10001") == [2000]


async def test_a_repeated_approval_of_an_approved_action_resumes_it_and_it_runs_once(
    store: CaseStore, clock: ManualClock, connectors: Connectors, billing: Shop
):
    approvals = approvals_on(store, clock, Running(connectors))
    record = await approved(store, approvals, refund())  # and then vigil died: nothing ran

    async with store.engine.begin() as conn:
        again = await approvals.decide(
            conn, record, approve=True, by="max", role="admin", arguments_hash=record.arguments_hash
        )
    assert again.refused is None and again.record.status == "approved"
    assert (await approvals.execute(again.record)).status == "executed"
    assert (await approvals.execute(again.record)).status == "executed"  # a third try finds it done
    assert billing.refunds("ORD-10001") == [2000]
    assert await steps(store) == [
        ("suggested", "vigil"), ("approved", "lee"), ("resumed", "max"), ("executing", "vigil"), ("executed", "vigil"),
    ]  # fmt: skip


async def test_a_decision_by_action_id_takes_only_an_action_of_the_feedbacks_own_conversation(
    store: CaseStore, clock: ManualClock, connectors: Connectors
):
    approvals = approvals_on(store, clock, Running(connectors))
    theirs = refund("c-2")
    await store.record(message("c-1"))
    await store.record(message("c-2"))
    await approvals.record(theirs)
    store.keep_with([ApprovalKeeper(approvals, PROOFS, clock)])

    await store.record(approval("c-1", theirs))  # names c-2's action from c-1

    assert (await now_of(store, theirs.action_id)).status == "suggested"


# --- Reproduction 5: a write that timed out is in doubt, not failed, and the reconciler settles it ---


async def test_a_timeout_after_the_system_did_it_is_in_doubt_until_the_reconciler_settles_it(
    store: CaseStore, clock: ManualClock, connectors: Connectors, billing: Shop
):
    approvals = approvals_on(store, clock, Running(connectors))
    record = await approved(store, approvals, refund())
    faults.configure("action.after_call=timeout")

    doubtful = await approvals.execute(record)

    assert doubtful.status == "in_doubt"
    assert (doubtful.result or {})["kind"] == "InjectedTimeout"
    assert billing.refunds("ORD-10001") == [2000]  # done, though vigil did not hear so
    assert [r.status for r in await approvals.reconcile()] == ["executed"]  # in doubt: no claim to wait for
    done = await now_of(store, record.action_id)
    assert (done.status, done.attempts) == ("executed", 2)
    assert billing.refunds("ORD-10001") == [2000]


async def test_an_action_the_system_refuses_on_the_resend_fails_for_good(
    store: CaseStore, clock: ManualClock, connectors: Connectors, billing: Shop
):
    approvals = approvals_on(store, clock, Running(connectors))
    too_much = await approved(store, approvals, refund(amount=10_000_000))
    faults.configure("action.after_claim=timeout")  # the call is never sent; vigil cannot know that

    assert (await approvals.execute(too_much)).status == "in_doubt"
    assert [r.status for r in await approvals.reconcile()] == ["failed"]

    failed = await now_of(store, too_much.action_id)
    assert failed.status == "failed" and "billing" in (failed.result or {})["error"]
    assert billing.refunds("ORD-10001") == []


# --- Reproduction 9: every exception of execute ends the action, none leaves it executing ---


async def test_an_action_the_reloaded_rulebook_no_longer_has_fails_with_the_reason(
    store: CaseStore, clock: ManualClock, connectors: Connectors, billing: Shop
):
    def reloaded(tenant: str, name: str) -> ConnectorCall:
        raise KeyError(name)

    approvals = approvals_on(store, clock, Running(connectors), calls=reloaded)
    record = await approved(store, approvals, refund())

    done = await approvals.execute(record)

    assert done.status == "failed"
    assert "refund_order" in (done.result or {})["error"] and (done.result or {})["kind"] == "KeyError"
    assert billing.refunds("ORD-10001") == []


async def test_arguments_that_fill_no_path_fail_the_action_with_the_reason(
    store: CaseStore, clock: ManualClock, connectors: Connectors, billing: Shop
):
    approvals = approvals_on(store, clock, Running(connectors))
    arguments = {"order_id": "", "amount_cents": 2000, "payment_method_id": "PM-5001", "reason": "broken"}
    record = await approved(store, approvals, refund(arguments=arguments))

    done = await approvals.execute(record)

    assert (done.status, (done.result or {})["kind"]) == ("failed", "ValueError")
    assert "order_id" in (done.result or {})["error"]
    assert (await now_of(store, record.action_id)).status == "failed"


# --- Reproduction 8, in the store: an action over lets the same request be a new action ---


async def test_the_same_request_is_a_new_action_once_the_first_is_over_and_the_same_one_while_it_is_not(
    store: CaseStore, clock: ManualClock, connectors: Connectors
):
    approvals = approvals_on(store, clock, Running(connectors))
    first = refund()
    assert (await approvals.record(first))[1]
    asked_again = refund(action_id=action_id("c-1", first.arguments_hash, "c-1-m5"), suggested_at=T0 + timedelta(1))
    kept, new = await approvals.record(asked_again)
    assert (kept.action_id, new) == (first.action_id, False)  # still open: the same action

    async with store.engine.begin() as conn:
        await approvals.decide(conn, first, approve=False, by="ana", role="analyst", arguments_hash=None)
    kept, new = await approvals.record(asked_again)
    assert (kept.action_id, new) == (asked_again.action_id, True)


def message(conversation: str) -> Message:
    return Message(
        type="message",
        schema_version=1,
        message_id=f"{conversation}-m1",
        conversation_id=conversation,
        tenant="acme",
        sent_at=T0,
        role="customer",
        text="please refund ORD-10001",
    )


def approval(conversation: str, record: ActionRecord) -> Feedback:
    """The lead's approval of ``record``, signed as the panel signs it."""
    unsigned = Feedback(
        type="feedback",
        schema_version=1,
        feedback_id=str(uuid.uuid4()),
        suggestion_id=f"s-{conversation}",
        action_id=record.action_id,
        conversation_id=conversation,
        tenant="acme",
        verdict="approved",
        by="lee",
        role="lead",
        arguments_hash=record.arguments_hash,
        at=T0,
    )
    return PROOFS.signed(unsigned, action_id=record.action_id, now=T0)
