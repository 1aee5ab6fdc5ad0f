"""Two `vigil run` processes in one consumer group on one PostgreSQL database, over Kafka, against the demo's systems
over HTTP: six conversations of one customer ask at once for £45 back on one order, and the conjunctive-risk guard
lets one through, as it does one after another (``refund_splitting_order``); billing pays £45 once."""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.actions.test_history import busy_when_looked_up
from tests.conftest import create_topics, new_topics
from tests.e2e.action_chat import APPROVAL_SECRET, PARTITIONS, Chat, Daemon
from tests.e2e.harness import Database, VigilCli, VigilProcess, eventually, ready
from tests.e2e.shop import Order, Shop
from tests.kafka_client import AckedProducer
from vigil.dev.broker import EmbeddedBroker

pytestmark = pytest.mark.e2e

CUSTOMER, ORDER, METHOD = "CUS-4901", "ORD-49011", "PM-49010"
CONVERSATIONS = 6
_ASSIGNED = re.compile(r"assigned partitions: \[(.*)\]")


def assigned(process: VigilProcess) -> set[str]:
    """The partitions the process said it was given last."""
    found = _ASSIGNED.findall(process.log())
    return {p.strip(" '") for p in found[-1].split(",") if p.strip()} if found else set()


def refunds(db: Database) -> list[dict[str, Any]]:
    """The customer's refund actions as stored."""
    keys = ("conversation_id", "status", "verdict", "rule", "suggestion_id", "arguments_hash", "action_id", "tenant")
    rows = db.query(f"SELECT {', '.join(keys)} FROM action WHERE customer_id = ? AND name = 'refund_order'", CUSTOMER)
    return [dict(zip(keys, row, strict=True)) for row in rows]


async def test_two_processes_on_one_postgresql_let_one_of_six_split_refunds_through(
    kafka: EmbeddedBroker, tmp_path: Path, pg_url: str
):
    topics = new_topics()
    await create_topics(kafka.bootstrap, topics, partitions=PARTITIONS)
    shop = Shop(tmp_path / "systems.sqlite").start()
    shop.add_customer(CUSTOMER, methods={METHOD: {"kind": "card"}})
    shop.add_order(Order(ORDER, CUSTOMER, "delivered", 30000, METHOD))
    producer = AckedProducer(kafka.bootstrap)
    clis = [VigilCli(tmp_path / name) for name in ("a", "b")]
    try:
        processes = []
        for cli in clis:
            cli.tmp_path.mkdir()
            processes.append(
                cli.daemon(
                    kafka.bootstrap,
                    topics,
                    pg_url,
                    VIGIL_PROGRESS__ENABLED="false",
                    VIGIL_ACTIONS__SYSTEMS=shop.systems(),
                    VIGIL_APPROVALS__SECRET=APPROVAL_SECRET,
                )
            )
        for process in processes:
            await ready(process, timeout_s=120)

        def split() -> bool:
            a, b = (assigned(p) for p in processes)
            return bool(a) and bool(b) and not a & b and len(a | b) == PARTITIONS

        await eventually("both processes own partitions", split, 60)
        daemon = Daemon(processes[0], Database(pg_url), shop, kafka.bootstrap, topics, producer)
        chats = [Chat(daemon, f"split-{uuid.uuid4().hex[:8]}", CUSTOMER) for _ in range(CONVERSATIONS)]

        shop.faults.delay_after_commit_s, shop.faults.delay_count = 0.3, 1000
        busy = asyncio.create_task(busy_when_looked_up(shop.faults, pg_url, CUSTOMER, CONVERSATIONS))
        await daemon.send(
            [c.message("customer", f"The speakers from {ORDER} broke, please refund £45.00") for c in chats]
        )
        await eventually("six refunds suggested", lambda: len(refunds(daemon.db)) == CONVERSATIONS, 60, processes[0])
        await busy
        shop.faults.delay_count = 0
        await daemon.send(
            [
                message
                for c in chats
                for message in (
                    c.message("analyst", "Thanks, your identity is verified."),
                    c.message("analyst", f"I can refund 45.00 for {ORDER} to your card. Shall I go ahead?"),
                    c.message("customer", "yes please"),
                )
            ]
        )
        await daemon.processed()
        by_id = {c.id: c for c in chats}
        await daemon.send(
            [
                by_id[a["conversation_id"]].decision(a, "approved", by="ana", role="analyst")
                for a in refunds(daemon.db)
                if a["verdict"] == "needs_approval"
            ]
        )
        await daemon.processed()
        stored = refunds(daemon.db)
        statuses = sorted(f"{a['status']} by {a['rule']}" if a["status"] == "blocked" else a["status"] for a in stored)
    finally:
        producer.flush(10)
        for cli in clis:
            cli.kill_all()
        shop.stop()

    # What the actions' statuses were says why, if no refund was paid (in doubt, blocked, never approved...).
    assert shop.refunds(ORDER) == [4500], stored
    assert statuses == ["blocked by refund_splitting_order"] * 5 + ["executed"], stored
