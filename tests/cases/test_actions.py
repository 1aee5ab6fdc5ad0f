"""Stored actions on SQLite and PostgreSQL: one row per conversation, action, arguments and the event that asked;
a status moves only from where it is, and a claim is taken over only once it has lapsed; the audit log is appended
to and never changed, whoever asks the database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from vigil.cases import actions
from vigil.cases.actions import ActionRecord, action_id, arguments_hash
from vigil.cases.store import CaseStore
from vigil.cases.tables import ACTION_AUDIT

T0 = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
OPEN = ("suggested",)


def record(
    conversation_id: str = "c-1",
    amount: int = 1500,
    customer: str = "CUS-1",
    at: datetime = T0,
    name: str = "refund_order",
    **changes: object,
) -> ActionRecord:
    arguments = {"order_id": "ORD-1", "amount_cents": amount}
    digest = arguments_hash(name, arguments)
    values: dict[str, object] = {
        "action_id": action_id(conversation_id, digest, f"{conversation_id}-m1"),
        "conversation_id": conversation_id,
        "tenant": "acme",
        "name": name,
        "arguments": arguments,
        "arguments_hash": digest,
        "verdict": "needs_approval",
        "rule": "refund_needs_approval",
        "reason": "Refunds move money.",
        "status": "suggested",
        "suggested_at": at,
        "customer_id": customer,
        "amount_cents": amount,
    }
    return ActionRecord(**(values | changes))  # type: ignore[arg-type]


def test_the_hash_binds_the_action_and_every_argument_and_ignores_key_order():
    assert arguments_hash("refund_order", {"a": 1, "b": 2}) == arguments_hash("refund_order", {"b": 2, "a": 1})
    assert arguments_hash("refund_order", {"a": 1}) != arguments_hash("refund_order", {"a": 2})
    assert arguments_hash("refund_order", {"a": 1}) != arguments_hash("issue_credit", {"a": 1})
    assert action_id("c-1", "h", "m1") != action_id("c-2", "h", "m1")
    assert action_id("c-1", "h", "m1") != action_id("c-1", "h", "m2")  # asked again later: another action


async def test_the_same_action_is_stored_once(store: CaseStore):
    async with store.engine.begin() as conn:
        assert await actions.insert(conn, record())
        assert not await actions.insert(conn, record())
        assert await actions.insert(conn, record(amount=1600, at=T0 + timedelta(minutes=1)))
        assert [r.amount_cents for r in await actions.of_conversation(conn, "c-1")] == [1500, 1600]


async def test_a_status_moves_only_from_where_it_is(store: CaseStore):
    first = record()
    async with store.engine.begin() as conn:
        await actions.insert(conn, first)
        moved = await actions.move(conn, first.action_id, from_=OPEN, to="approved", decided_by="ana")
        assert moved is not None and (moved.status, moved.decided_by) == ("approved", "ana")
        assert await actions.move(conn, first.action_id, from_=OPEN, to="approved", decided_by="bo") is None
        assert (await actions.get(conn, first.action_id)).decided_by == "ana"  # type: ignore[union-attr]


async def test_expired_finds_only_open_actions_past_their_time(store: CaseStore):
    async with store.engine.begin() as conn:
        await actions.insert(conn, record(amount=1, expires_at=T0 + timedelta(minutes=5)))
        await actions.insert(conn, record(amount=2, expires_at=T0 + timedelta(minutes=50)))
        await actions.insert(conn, record(amount=3, expires_at=T0, status="executed"))
        due = await actions.expired(conn, T0 + timedelta(minutes=10), statuses=OPEN)
    assert [r.amount_cents for r in due] == [1]


async def test_a_customers_history_spans_conversations_within_the_window(store: CaseStore):
    async with store.engine.begin() as conn:
        await actions.insert(conn, record("c-1", amount=1, at=T0 - timedelta(days=40)))
        await actions.insert(conn, record("c-2", amount=2, at=T0 - timedelta(days=2)))
        await actions.insert(conn, record("c-3", amount=3, at=T0))
        await actions.insert(conn, record("c-4", amount=4, at=T0, customer="CUS-2"))
        history = await actions.history(
            conn, "acme", "CUS-1", since=T0 - timedelta(days=30), statuses=OPEN, excluding=None
        )
        without = await actions.history(
            conn,
            "acme",
            "CUS-1",
            since=T0 - timedelta(days=30),
            statuses=OPEN,
            excluding=history[0]["action_id"],
        )
        assert await actions.history(conn, "acme", "CUS-1", since=T0 - timedelta(days=30), statuses=["executed"]) == []
    assert [(r["conversation_id"], r["arguments"]["amount_cents"]) for r in history] == [("c-2", 2), ("c-3", 3)]
    assert [r["conversation_id"] for r in without] == ["c-3"]


async def test_goodwill_spend_counts_goodwill_given_not_suggested_nor_other_actions(store: CaseStore):
    async with store.engine.begin() as conn:
        await actions.insert(conn, record(amount=500, goodwill=True, status="executed", executed_at=T0))
        await actions.insert(conn, record(amount=700, goodwill=True, status="suggested"))
        await actions.insert(conn, record(amount=900, goodwill=False, status="executed", executed_at=T0))
        await actions.insert(
            conn, record("c-2", amount=300, goodwill=True, status="executed", executed_at=T0, customer="CUS-2")
        )
        assert await actions.spend(conn, "acme", since=T0 - timedelta(days=1)) == 800
        assert await actions.spend(conn, "acme", since=T0 - timedelta(days=1), customer_id="CUS-1") == 500
        assert await actions.spend(conn, "acme", since=T0 + timedelta(seconds=1)) == 0


async def test_goodwill_that_may_have_been_given_counts_from_when_it_ran_or_else_was_approved(store: CaseStore):
    # Reproduction 5's half: a credit whose write timed out (in doubt) may have been paid: it counts, as does one
    # approved or running, for the customer's 30-day goodwill and the tenant's budget alike.
    amounts = {
        "approved": 1, "executing": 2, "in_doubt": 4, "executed": 8,
        "suggested": 16, "failed": 32, "rejected": 64, "expired": 128, "blocked": 256, "declined": 512,
    }  # fmt: skip
    async with store.engine.begin() as conn:
        for status, amount in amounts.items():
            ran = {"executed_at": T0 + timedelta(hours=1)} if status in ("executed", "failed") else {}
            given = record(amount=amount, goodwill=True, status=status, decided_at=T0, **ran)
            await actions.insert(conn, given)
        long_ago = T0 - timedelta(days=31)
        await actions.insert(
            conn, record(amount=1024, goodwill=True, status="in_doubt", suggested_at=long_ago, decided_at=long_ago)
        )
        since = T0 - timedelta(days=30)
        assert await actions.spend(conn, "acme", since=since, customer_id="CUS-1") == 1 + 2 + 4 + 8
        spent = sorted(await actions.spends(conn, "acme", since=since), key=lambda s: s[1])
    assert spent == [(T0, 1), (T0, 2), (T0, 4), (T0 + timedelta(hours=1), 8)]


async def test_the_audit_log_is_appended_to_and_the_database_refuses_to_change_it(store: CaseStore):
    first = record()
    async with store.engine.begin() as conn:
        await actions.insert(conn, first)
        await actions.append(conn, first, "suggested", at=T0, actor="vigil", detail={"verdict": "needs_approval"})
        await actions.append(conn, first, "approved", at=T0, actor="ana", role="lead")
    async with store.engine.connect() as conn:
        log = await actions.audit_log(conn, "c-1")
    assert [(e.step, e.actor, e.role) for e in log] == [("suggested", "vigil", None), ("approved", "ana", "lead")]
    for statement in (
        sa.update(ACTION_AUDIT).values(actor="mallory"),
        sa.delete(ACTION_AUDIT),
    ):
        with pytest.raises(sa.exc.DBAPIError, match="append-only"):
            async with store.engine.begin() as conn:
                await conn.execute(statement)
    async with store.engine.connect() as conn:
        assert [e.actor for e in await actions.audit_log(conn, "c-1")] == ["vigil", "ana"]


async def test_a_lapsed_claim_is_taken_over_once_and_a_live_one_not_at_all(store: CaseStore):
    live = record(amount=1, status="executing", claimed_at=T0)
    lapsed = record(amount=2, status="executing", claimed_at=T0 - timedelta(minutes=5))
    before, now = T0 - timedelta(minutes=1), T0 + timedelta(seconds=1)

    async def take(r: ActionRecord) -> ActionRecord | None:
        return await actions.move(
            conn, r.action_id, from_=["executing"], to="executing", claimed_before=before, claimed_at=now
        )

    async with store.engine.begin() as conn:
        for r in (live, lapsed):
            await actions.insert(conn, r)
        assert await take(live) is None  # still held by whoever claimed it
        taken = await take(lapsed)
        assert taken is not None and taken.claimed_at == now
        assert await take(lapsed) is None  # a second reconciler finds its claim fresh


async def test_what_the_reconciler_settles_is_lapsed_claims_and_everything_in_doubt(store: CaseStore):
    async with store.engine.begin() as conn:
        await actions.insert(conn, record(amount=1, status="approved", claimed_at=T0))
        await actions.insert(conn, record(amount=2, status="approved", claimed_at=T0 - timedelta(minutes=5)))
        await actions.insert(conn, record(amount=3, status="executing", claimed_at=T0 - timedelta(minutes=5)))
        await actions.insert(conn, record(amount=4, status="in_doubt", claimed_at=T0))
        await actions.insert(conn, record(amount=5, status="executed", claimed_at=T0 - timedelta(minutes=5)))
        await actions.insert(conn, record(amount=6, status="approved"))  # approved before claims were kept
        due = await actions.lapsed(
            conn, claimed=["approved", "executing"], claimed_before=T0 - timedelta(minutes=1), doubtful=["in_doubt"]
        )
        assert await actions.count(conn, ["in_doubt"]) == 1
    assert sorted(r.amount_cents or 0 for r in due) == [2, 3, 4, 6]


async def test_the_twin_of_a_request_is_the_one_not_over(store: CaseStore):
    first = record(status="rejected")
    again = record(action_id=action_id("c-1", first.arguments_hash, "c-1-m7"), at=T0 + timedelta(minutes=1))
    async with store.engine.begin() as conn:
        await actions.insert(conn, first)
        assert await actions.twin(conn, "c-1", first.arguments_hash, over=["rejected"]) is None
        await actions.insert(conn, again)
        found = await actions.twin(conn, "c-1", first.arguments_hash, over=["rejected"])
        assert found is not None and found.action_id == again.action_id
        assert await actions.twin(conn, "c-2", first.arguments_hash, over=["rejected"]) is None
