"""The conjunctive-risk guard cannot be raced: proposals and approvals for one customer, in several pipelines on one
database (SQLite and PostgreSQL) against the demo's systems over HTTP, end as they do one after another.

Six conversations of one customer each ask for £45 back on the same order, each small enough for an analyst, so
``refund_splitting_order`` lets one through (two would be £90, which a lead approves). The guard reads the
customer's actions and the new one is stored in one transaction under the customer's lock; an approved action is
checked again under that lock as it is claimed, so that six refunds approved before the pattern was in the rulebook
still pay once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from tests.actions.systems import Shop, settings
from tests.actions.test_skill import T0, Chat, action_of
from tests.e2e.harness import eventually
from vigil.cases import actions as stored
from vigil.core import faults
from vigil.core.clock import ManualClock
from vigil.dev.systems.faults import Faults
from vigil.testing import Wired, wired
from vigil.wire.events import Suggestion

ORDER, CUSTOMER = "ORD-77001", "CUS-1001"
PIPELINES, CONVERSATIONS = 3, 6
DEMO = Path(__file__).parents[2] / "knowledge" / "rulebooks" / "demo"


LOOKUP_S = 0.3
"""How long the systems take to answer each read while the customers ask: the six conversations' reads come back
together, so their guards run at the same moment, as they would after a slow answer in production."""
BUSY_S = 1.0
"""How long the database is busy with another writer just as the guards run (SQLite's one write lock, or a lock on
``action`` on PostgreSQL): a new action waits to be written, while reads go on."""


@pytest.fixture
def order(shop: Shop) -> str:
    """A £300 order of the customer's, delivered, paid with their Visa: billing would refund £45 six times."""
    with contextlib.closing(sqlite3.connect(shop.db)) as conn, conn:
        conn.execute(
            "INSERT INTO orders (id, customer_id, status, items, total_cents, currency, payment_method_id, address, "
            "placed_at) VALUES (?, ?, 'delivered', ?, 30000, 'GBP', 'PM-5001', '1 Test Street, Leeds LS1 1AA', ?)",
            (
                ORDER,
                CUSTOMER,
                json.dumps([{"sku": "SKU-T", "name": "speakers", "qty": 1, "price_cents": 30000}]),
                (T0 - timedelta(days=3)).isoformat(),
            ),
        )
    return ORDER


@contextlib.asynccontextmanager
async def pipelines(tmp_path: Path, db_url: str, shop: Shop, *, rulebook: str = "demo") -> AsyncIterator[list[Wired]]:
    """``PIPELINES`` wired pipelines (as many replicas) on the one database ``db_url``."""
    configured = settings(shop, db_url, rulebook=rulebook)
    async with contextlib.AsyncExitStack() as stack:
        running = []
        for n in range(PIPELINES):
            folder = tmp_path / f"{Path(rulebook).name}-{n}"
            folder.mkdir()
            running.append(
                await stack.enter_async_context(
                    wired(folder, settings=configured, clock=ManualClock(T0), capabilities=["cases", "actions"])
                )
            )
        yield running


def chats(running: Sequence[Wired]) -> list[Chat]:
    """One conversation of the customer per pipeline, in turn."""
    return [Chat(running[n % len(running)], f"split-{n}", CUSTOMER) for n in range(CONVERSATIONS)]


async def ask_for_45(chat: Chat) -> None:
    """The customer asks for £45 back."""
    await chat.say("customer", f"The speakers from {ORDER} broke, please refund £45.00")


async def confirm(chat: Chat) -> None:
    """The analyst checks who the customer is and reads the refund back; they say yes."""
    await chat.say("analyst", "Thanks, your identity is verified.")
    await chat.say("analyst", f"I can refund 45.00 for {ORDER} to your Visa. Shall I go ahead?")
    await chat.say("customer", "yes please")


async def approve(chat: Chat, card: Suggestion | None = None) -> None:
    """An analyst approves the conversation's refund (its latest card, or ``card``), if it waits for an approval."""
    card = card or latest(chat)
    action = action_of(card)
    if action["status"] == "suggested" and action["verdict"] == "needs_approval":
        await chat.decide(card, "approved", by="ana", role="analyst", arguments_hash=action["arguments_hash"])


def latest(chat: Chat) -> Suggestion:
    return [c for c in chat.cards() if action_of(c)["name"] == "refund_order"][-1]


async def ask(shop: Shop, db_url: str, chats: Sequence[Chat], *, at_once: bool) -> None:
    """Each customer asks for £45 back (the systems slow, and the database busy as the last one's guard runs), then
    each confirms it."""
    shop.faults.delay_after_commit_s, shop.faults.delay_count = LOOKUP_S, 1000
    busy = asyncio.create_task(busy_when_looked_up(shop.faults, db_url, CUSTOMER, len(chats)))
    await each(chats, ask_for_45, at_once=at_once)
    await busy
    shop.faults.delay_count = 0
    await each(chats, confirm, at_once=at_once)


async def busy_when_looked_up(faults: Faults, db_url: str, customer: str, times: int) -> None:
    """Once the systems were asked about ``customer`` ``times`` times (the last read before each guard), keep the
    database busy writing for ``BUSY_S``."""
    asked = f"GET /customers/{customer}"
    await eventually("the customer looked up", lambda: faults.requests.count(asked) >= times, 60)
    async with writing(db_url):
        await asyncio.sleep(BUSY_S)


@contextlib.asynccontextmanager
async def writing(db_url: str) -> AsyncIterator[None]:
    """Another writer: SQLite's write lock, or on PostgreSQL the ``action`` table locked against writes (it may
    still be read)."""
    url = sa.make_url(db_url)
    if url.get_backend_name() == "sqlite":
        conn = sqlite3.connect(str(url.database), isolation_level=None, timeout=10, check_same_thread=False)
        try:
            await asyncio.to_thread(conn.execute, "BEGIN IMMEDIATE")
            yield
            conn.execute("ROLLBACK")
        finally:
            conn.close()
        return
    engine = create_async_engine(db_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(sa.text("LOCK TABLE action IN EXCLUSIVE MODE"))
            yield
    finally:
        await engine.dispose()


async def each(chats: Sequence[Chat], step: object, *, at_once: bool) -> None:
    """``step`` for every conversation: all at once, or one after another."""
    if at_once:
        await asyncio.gather(*(step(chat) for chat in chats))  # type: ignore[operator]
        return
    for chat in chats:
        await step(chat)  # type: ignore[operator]


async def statuses(running: Sequence[Wired]) -> dict[str, str]:
    """Each conversation's refund: its status (and for a blocked one, the pattern that blocked it)."""
    found = {}
    async with running[0].store.engine.connect() as conn:
        for n in range(CONVERSATIONS):
            for record in await stored.of_conversation(conn, f"split-{n}"):
                found[record.conversation_id] = (
                    f"blocked by {record.rule}" if record.status == "blocked" else record.status
                )
    return found


def escalated(running: Sequence[Wired]) -> set[str]:
    """The conversations that got an escalation from the guard."""
    return {s.conversation_id for w in running for s in w.published if s.kind == "escalation"}


@pytest.mark.parametrize("at_once", [False, True], ids=["one-after-another", "at-once"])
async def test_six_split_refunds_asked_for_at_once_pay_once_as_they_do_one_after_another(
    tmp_path: Path, db_url: str, shop: Shop, order: str, at_once: bool
):
    async with pipelines(tmp_path, db_url, shop) as running:
        conversations = chats(running)
        await ask(shop, db_url, conversations, at_once=at_once)
        await each(conversations, approve, at_once=at_once)
        found = await statuses(running)

    assert shop.refunds(ORDER) == [4500]
    assert sorted(found.values()) == ["blocked by refund_splitting_order"] * 5 + ["executed"]
    assert escalated(running) == {c for c, status in found.items() if status.startswith("blocked")}


@pytest.mark.parametrize("at_once", [False, True], ids=["one-after-another", "at-once"])
async def test_six_split_refunds_approved_before_the_pattern_existed_are_checked_again_as_they_run_and_pay_once(
    tmp_path: Path, db_url: str, shop: Shop, order: str, at_once: bool
):
    without = tmp_path / "without-risk"
    without.mkdir()
    for name in ("actions.yaml", "policy.cedar"):
        shutil.copy(DEMO / name, without / name)
    async with pipelines(tmp_path, db_url, shop, rulebook=str(without)) as running:
        conversations = chats(running)
        await ask(shop, db_url, conversations, at_once=at_once)
        cards = {chat.conversation: latest(chat) for chat in conversations}
        assert set((await statuses(running)).values()) == {"suggested"}  # no guard: six refunds wait for approval

    async def approved(chat: Chat) -> None:
        await approve(chat, cards[chat.conversation])

    async with pipelines(tmp_path, db_url, shop) as running:  # the rulebook with its risk patterns
        await each(chats(running), approved, at_once=at_once)
        found = await statuses(running)

    assert shop.refunds(ORDER) == [4500]
    assert sorted(found.values()) == ["blocked by refund_splitting_order"] * 5 + ["executed"]
    assert escalated(running) == {c for c, status in found.items() if status.startswith("blocked")}


async def retried(pipeline: Wired, step: Awaitable[None]) -> None:
    """``step``, with the pipeline's clock moving a second at a time so that its back-off before a retry passes."""
    clock = pipeline.clock
    assert isinstance(clock, ManualClock)
    task = asyncio.ensure_future(step)
    for _ in range(600):
        if task.done():
            break
        clock.advance(1.0)
        await asyncio.wait([task], timeout=0.05)
    await task


@pytest.fixture
def failing_once_after_the_guard() -> Iterator[None]:
    faults.configure("action.after_guard=db_error")
    try:
        yield
    finally:
        faults.configure("")


@pytest.mark.usefixtures("failing_once_after_the_guard")
async def test_a_database_error_after_the_guard_read_undoes_the_whole_step_and_the_retry_suggests_once(
    tmp_path: Path, db_url: str, shop: Shop, order: str
):
    async with pipelines(tmp_path, db_url, shop) as running:
        first, other = Chat(running[0], "split-0", CUSTOMER), Chat(running[1], "split-1", CUSTOMER)
        await retried(running[0], ask_for_45(first))  # the skill fails in the locked transaction, and is tried again
        await ask_for_45(other)  # the customer's lock was let go with the failed transaction
        found = await statuses(running)
        async with running[0].store.engine.connect() as conn:
            steps = [e.step for e in await stored.audit_log(conn, "split-0")]

    assert found == {"split-0": "suggested", "split-1": "blocked by refund_splitting_order"}
    assert steps == ["suggested"]
    assert [action_of(c)["status"] for c in first.cards()] == ["suggested"]
