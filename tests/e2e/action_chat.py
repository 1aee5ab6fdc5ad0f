"""Conversations about actions played against a `vigil run` over Kafka, with the demo systems next to it: messages
and feedback produced on the input topic as a chat platform and the panel would send them, the action cards read
back from the daemon's database (which the test owns) to approve them, and the daemon's own progress read from the
offsets its consumer group committed.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from tests.conftest import Topics, create_topics, new_topics
from tests.e2e.harness import Database, VigilCli, VigilProcess, eventually, ready
from tests.e2e.shop import Shop, ShopFile, stamp
from tests.kafka_client import AckedProducer, committed
from vigil.core.clock import SystemClock
from vigil.dev.broker import EmbeddedBroker
from vigil.wire.events import Feedback
from vigil.wire.proof import Proofs

PARTITIONS = 3
APPROVAL_SECRET = "tests/e2e: the key the panel and the daemon share"
"""``VIGIL_APPROVALS__SECRET`` of the daemons here: what an approver client signs decisions with."""
PROOFS = Proofs([APPROVAL_SECRET.encode()])
CARD_WAIT_S = 60.0


@dataclass
class Daemon:
    """A `vigil run` over Kafka with the actions capability against ``shop``."""

    process: VigilProcess
    db: Database
    shop: ShopFile
    bootstrap: str
    topics: Topics
    producer: AckedProducer = field(repr=False)

    async def send(self, events: list[dict[str, Any]]) -> None:
        """Produce ``events`` in order, keyed by conversation (each conversation stays on one partition)."""
        if events:
            await asyncio.to_thread(self._produce, events)

    def _produce(self, events: list[dict[str, Any]]) -> None:
        errors: list[str] = []

        def delivered(err, _msg) -> None:  # type: ignore[no-untyped-def]
            if err is not None:
                errors.append(str(err))

        for event in events:
            value = json.dumps(event, ensure_ascii=False).encode()
            self.producer.produce(
                self.topics.input, key=event["conversation_id"].encode(), value=value, on_delivery=delivered
            )
        assert self.producer.flush(30) == 0, "records not delivered"
        assert not errors, errors

    def actions(self, conversation_id: str) -> list[dict[str, Any]]:
        """The conversation's stored actions, oldest first."""
        rows = self.db.query(
            "SELECT action_id, name, arguments, arguments_hash, status, verdict, rule, approver, suggestion_id, "
            "amount_cents, attempts, tenant, facts FROM action WHERE conversation_id = ? "
            "ORDER BY suggested_at, action_id",
            conversation_id,
        )
        keys = ("action_id", "name", "arguments", "arguments_hash", "status", "verdict", "rule", "approver")
        keys += ("suggestion_id", "amount_cents", "attempts", "tenant", "facts")
        found = [dict(zip(keys, row, strict=True)) for row in rows]
        for action in found:
            action["arguments"], action["facts"] = _json(action["arguments"]), _json(action["facts"]) or {}
        return found

    def audit(self, conversation_id: str) -> list[tuple[str, str, str | None, dict[str, Any]]]:
        """The conversation's audit log: (step, actor, role, detail) in the order written."""
        rows = self.db.query(
            "SELECT step, actor, role, detail FROM action_audit WHERE conversation_id = ? ORDER BY seq",
            conversation_id,
        )
        return [(step, actor, role, _json(detail)) for step, actor, role, detail in rows]

    def suggestions(self, conversation_id: str) -> list[dict[str, Any]]:
        rows = self.db.query(
            "SELECT suggestion_id, kind, action FROM suggestion WHERE conversation_id = ? ORDER BY created_at",
            conversation_id,
        )
        return [{"suggestion_id": s, "kind": k, "action": _json(a) if a else None} for s, k, a in rows]

    async def card(self, conversation_id: str, name: str, **where: Any) -> dict[str, Any]:
        """The newest stored action ``name`` of the conversation matching ``where`` (waiting for it)."""

        def found() -> dict[str, Any] | None:
            matching = [
                a
                for a in self.actions(conversation_id)
                if a["name"] == name and all(a.get(k) == v for k, v in where.items())
            ]
            return matching[-1] if matching else None

        shown = lambda: self.actions(conversation_id)  # noqa: E731
        return dict(await eventually(f"{name} {where} in {conversation_id}", found, CARD_WAIT_S, self.process, shown))

    async def processed(self, timeout_s: float = 120.0) -> None:
        """Wait until the daemon committed every record of its input topic: all it was sent is done."""

        done = lambda: all_committed(self.bootstrap, self.topics, self.producer)  # noqa: E731
        await eventually("the daemon committed the whole input topic", done, timeout_s, self.process)


def _json(value: Any) -> Any:
    """A JSON column as read: text from SQLite, already decoded by psycopg from PostgreSQL."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def all_committed(bootstrap: str, topics: Topics, acked: AckedProducer, partitions: int = PARTITIONS) -> bool:
    """Whether ``topics``' group has committed every record of its input topic (those ``acked`` wrote included)."""
    ends = end_offsets(bootstrap, topics.input, partitions, acked=acked)
    at = committed(bootstrap, topics.group, topics.input, partitions=partitions)
    return all(at.get(p, -1) >= end for p, end in ends.items() if end > 0)


def end_offsets(
    bootstrap: str, topic: str, partitions: int = PARTITIONS, *, acked: AckedProducer | None = None
) -> dict[int, int]:
    """Where each partition of ``topic`` ends: its watermark, or one past the last record ``acked`` wrote there where
    that is further (Tansu's watermark falls short after a batch of several records: ``AckedProducer``)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4().hex[:6]}"})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        consumer.close()
    written = acked.ends(topic) if acked is not None else {}
    return {p: max(end, written.get(p, 0)) for p, end in ends.items()}


@asynccontextmanager
async def action_daemon(kafka: EmbeddedBroker, tmp: Path, **settings: str) -> AsyncIterator[Daemon]:
    """The demo systems and one `vigil run` (actions on, the demo rulebook) against them over Kafka."""
    topics = new_topics()
    await create_topics(kafka.bootstrap, topics, partitions=PARTITIONS)
    shop = Shop(tmp / "systems.sqlite").start()
    cli = VigilCli(tmp)
    url = f"sqlite+aiosqlite:///{tmp / 'vigil.db'}"
    producer = AckedProducer(kafka.bootstrap)
    try:
        process = cli.daemon(
            kafka.bootstrap,
            topics,
            url,
            VIGIL_PROGRESS__ENABLED="false",
            VIGIL_ACTIONS__SYSTEMS=shop.systems(float(settings.pop("timeout_s", "5"))),
            VIGIL_APPROVALS__SECRET=APPROVAL_SECRET,
            **settings,
        )
        await ready(process, timeout_s=120)
        yield Daemon(process, Database(url), shop, kafka.bootstrap, topics, producer)
    finally:
        producer.flush(10)
        cli.kill_all()
        shop.stop()


class Chat:
    """One conversation of a customer, as the chat platform and the panel send it."""

    def __init__(self, daemon: Daemon, conversation_id: str, customer_id: str | None) -> None:
        self.daemon, self.id, self.customer_id = daemon, conversation_id, customer_id
        self.n = 0

    def message(self, role: str, text: str, metadata: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
        """A message event; a customer's carries the signed-in account the platform vouches for."""
        self.n += 1
        meta = dict(metadata or {})
        if role == "customer" and self.customer_id is not None:
            meta.setdefault("customer_id", self.customer_id)
        return {
            "type": "message", "schema_version": 1, "message_id": f"{self.id}-m{self.n}", "conversation_id": self.id,
            "sent_at": stamp(SystemClock().now()), "role": role, "text": text, "metadata": meta, **fields,
        }  # fmt: skip

    def decision(self, card: dict[str, Any], verdict: str, *, by: str, role: str, **fields: Any) -> dict[str, Any]:
        """A decision on ``card``'s action as an approver client sends it: naming the action, its tenant and (for an
        approval) the arguments shown, signed with the key the daemon holds (``fields`` change what is sent, after
        signing: a replayed or altered proof)."""
        said: dict[str, Any] = {"action_id": card["action_id"], "tenant": card["tenant"], "by": by, "role": role}
        if verdict == "approved":
            said["arguments_hash"] = card["arguments_hash"]
        unsigned = Feedback.model_validate(self.feedback(card["suggestion_id"], verdict, **said))
        signed = PROOFS.signed(unsigned, action_id=card["action_id"], now=SystemClock().now())
        return signed.model_dump(mode="json", exclude_none=True) | fields

    def feedback(self, suggestion_id: str, verdict: str, **fields: Any) -> dict[str, Any]:
        """A feedback event as the panel sends it (``by``, ``role``, ``arguments_hash`` as given)."""
        self.n += 1
        return {
            "type": "feedback", "schema_version": 1, "feedback_id": f"{self.id}-f{self.n}",
            "suggestion_id": suggestion_id, "conversation_id": self.id, "verdict": verdict,
            "at": stamp(SystemClock().now()), **{k: v for k, v in fields.items() if v is not None},
        }  # fmt: skip
