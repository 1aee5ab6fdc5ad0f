"""`vigil run` against a real broker and database: what is stored, in which order, once, across restarts."""

from __future__ import annotations

import signal
from datetime import datetime

import psycopg
import pytest

from tests.conftest import Topics, create_topics
from tests.e2e.harness import (
    Database,
    VigilCli,
    VigilProcess,
    at,
    case,
    chat,
    eventually,
    feedback,
    message,
    ready,
    record,
)
from tests.kafka_client import produce
from vigil.dev.broker import EmbeddedBroker

pytestmark = pytest.mark.e2e

# How each test conversation ends, and the state the case must be in afterwards.
ENDINGS: dict[str, tuple[str, list[tuple[str, dict[str, object]]]]] = {
    "closed": ("closed", [("closed", {"resolution": {"resolved_by": "human", "summary": "fixed", "csat": 5}})]),
    "escalated": ("escalated", [("escalated", {"priority": "P1"})]),
    "waiting": ("waiting_on_customer", [("status", {"status": "waiting_on_customer"})]),
    "reopened": ("open", [("closed", {}), ("reopened", {})]),
}


def conversation_script(conversation_id: str, ending: str, messages: int) -> list[dict[str, object]]:
    """One conversation's events in stream order: opened, messages, assigned, more messages, its ending."""
    events: list[dict[str, object]] = [case(conversation_id, f"{conversation_id}-e-open", "opened", when=at(0))]
    for n in range(messages):
        # Every seventh message comes from a device whose clock is behind: stream order is not sent_at order.
        sent = n * 10 - (45 if n % 7 == 6 else 0)
        extra: dict[str, object] = {}
        if n == 3:
            extra = {"author": "Ana Núñez", "metadata": {"channel": "web", "attachments": [{"name": "bill.pdf"}]}}
        text = f"{conversation_id} message {n}: ça va? 👋\nsecond line"
        role = ("customer", "analyst", "bot", "system")[n % 4]
        events.append(
            message(conversation_id, f"{conversation_id}-m{n:03d}", text, role=role, sent_at=at(sent), **extra)
        )
        if n == 5:
            events.append(case(conversation_id, f"{conversation_id}-e-assign", "assigned", assignee="priya.k"))
    for index, (event, fields) in enumerate(ENDINGS[ending][1]):
        events.append(case(conversation_id, f"{conversation_id}-e-end{index}", event, when=at(1000 + index), **fields))
    return events


def round_robin(scripts: list[list[dict[str, object]]]) -> list[dict[str, object]]:
    """Interleave conversations as they would be on a busy stream."""
    out: list[dict[str, object]] = []
    for step in range(max(len(s) for s in scripts)):
        out.extend(s[step] for s in scripts if step < len(s))
    return out


def same_instant(a: str, b: str) -> bool:
    return datetime.fromisoformat(a.replace("Z", "+00:00")) == datetime.fromisoformat(b.replace("Z", "+00:00"))


async def test_stores_conversations_in_stream_order_with_their_case_state(
    vigil: VigilCli, kafka: EmbeddedBroker, topics: Topics, db_url: str
) -> None:
    endings = list(ENDINGS)
    scripts = {f"order-c{n:02d}": conversation_script(f"order-c{n:02d}", endings[n % 4], 30) for n in range(10)}
    stream = round_robin(list(scripts.values()))
    messages = [e for e in stream if e["type"] == "message"]
    case_events = [e for e in stream if e["type"] == "case"]
    await create_topics(kafka.bootstrap, topics)
    half = len(stream) // 2
    produce(kafka.bootstrap, topics.input, [record(e) for e in stream[:half]])  # a backlog ...

    daemon = vigil.daemon(kafka.bootstrap, topics, db_url)
    await ready(daemon)
    produce(kafka.bootstrap, topics.input, [record(e) for e in stream[half:]])  # ... and live traffic

    db = Database(db_url)
    await db.reach("message", len(messages), daemon)
    await db.reach("case_event", len(case_events), daemon)
    for conversation_id, script in scripts.items():
        view = daemon.conversation(conversation_id)
        assert view is not None, conversation_id
        sent = [e for e in script if e["type"] == "message"][::-1]  # the page is newest first
        assert [m["message_id"] for m in view["messages"]] == [m["message_id"] for m in sent]
        for got, want in zip(view["messages"], sent, strict=True):
            assert (got["role"], got["text"], got["author"], got["metadata"]) == (
                want["role"],
                want["text"],
                want.get("author"),
                want.get("metadata"),
            )
            assert same_instant(got["sent_at"], str(want["sent_at"]))
        ending = endings[int(conversation_id[-2:]) % 4]
        assert view["status"] == ENDINGS[ending][0], conversation_id
        assert view["assignee"] == "priya.k"
        assert view["tenant"] == "default"
        assert (view["closed_at"] is not None) == (ending == "closed"), conversation_id
    assert daemon.status("/api/conversations/order-unknown") == 404

    response = daemon.get("/readyz")
    assert (response.status_code, response.json()) == (200, {"status": "ready"})
    assert daemon.status("/healthz") == 200
    samples = daemon.metrics()
    consumed = {
        dict(labels)["type"]: v for (name, labels), v in samples.items() if name == "vigil_events_consumed_total"
    }
    assert consumed.get("message") == len(messages)
    assert consumed.get("case") == len(case_events)
    assert not any(v for (name, _), v in samples.items() if name == "vigil_events_dead_lettered_total")
    assert not any(v for (name, _), v in samples.items() if name == "vigil_events_duplicate_total")
    daemon.stop()


def lifecycle(conversation_id: str) -> list[dict[str, object]]:
    """A whole case, ending closed, with the analyst's feedback on a suggestion."""
    events: list[dict[str, object]] = [case(conversation_id, f"{conversation_id}-open", "opened", when=at(0))]
    events += [message(conversation_id, f"{conversation_id}-m{n}", f"text {n}", sent_at=at(n + 1)) for n in range(5)]
    events.append(case(conversation_id, f"{conversation_id}-assign", "assigned", assignee="sam", when=at(10)))
    events.append(case(conversation_id, f"{conversation_id}-close", "closed", when=at(20)))
    events.append(feedback(conversation_id, f"{conversation_id}-fb", f"{conversation_id}-sugg", "dismissed"))
    return events


def duplicates(daemon_metrics: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> dict[str, float]:
    return {
        dict(labels)["type"]: v
        for (name, labels), v in daemon_metrics.items()
        if name == "vigil_events_duplicate_total"
    }


async def test_resent_events_are_stored_once_even_across_a_restart(
    vigil: VigilCli, kafka: EmbeddedBroker, topics: Topics, sqlite_url: str
) -> None:
    events = lifecycle("dup-c1") + lifecycle("dup-c2")
    by_type = {"message": 10.0, "case": 6.0, "feedback": 2.0}
    await create_topics(kafka.bootstrap, topics)
    db = Database(sqlite_url)

    def stored() -> tuple[int, int, int]:
        return db.count("message"), db.count("case_event"), db.count("feedback")

    def unchanged() -> None:
        assert stored() == (10, 6, 2)
        cases = db.query("SELECT id, status, message_count, assignee FROM conversation ORDER BY id")
        # The re-sent "opened" must not reopen the closed case, nor the messages count twice.
        assert cases == [("dup-c1", "closed", 5, "sam"), ("dup-c2", "closed", 5, "sam")]

    first = vigil.daemon(kafka.bootstrap, topics, sqlite_url)
    produce(kafka.bootstrap, topics.input, [record(e) for e in events])
    await eventually("first copies stored", lambda: stored() == (10, 6, 2), 30, first, show=stored)
    produce(kafka.bootstrap, topics.input, [record(e) for e in events])
    await eventually(
        "second copies seen",
        lambda: duplicates(first.metrics()) == by_type,
        20,
        first,
        show=lambda: duplicates(first.metrics()),
    )
    unchanged()
    first.stop()

    second = vigil.daemon(kafka.bootstrap, topics, sqlite_url)
    await ready(second)
    produce(kafka.bootstrap, topics.input, [record(e) for e in events])
    # Exactly one more copy of each: the restart re-read nothing the first process had committed.
    await eventually(
        "third copies seen",
        lambda: duplicates(second.metrics()) == by_type,
        30,
        second,
        show=lambda: duplicates(second.metrics()),
    )
    unchanged()
    assert second.metric("vigil_events_consumed_total", type="message") == 10
    second.stop()


async def interrupt_mid_stream(
    daemon: VigilProcess, db: Database, sig: signal.Signals, expected: dict[str, list[str]], stored_at_least: int
) -> int:
    """Signal ``daemon`` once ``stored_at_least`` messages are stored; check it drained and exited 0.

    How long the drain takes is measured by ``bench.lifecycle``; here only its outcome is checked."""
    await db.reach("message", stored_at_least, daemon, at_least=True)
    daemon.stop(sig)
    stored = db.count("message")
    assert stored < sum(len(ids) for ids in expected.values()), f"{sig.name} came after the whole stream was stored"
    for conversation_id, ids in expected.items():
        got = db.message_ids(conversation_id)
        assert got == ids[: len(got)], f"{conversation_id}: not a prefix of the stream"
    return stored


async def test_sigterm_and_sigint_drain_commit_and_exit_zero(
    vigil: VigilCli, kafka: EmbeddedBroker, topics: Topics, sqlite_url: str
) -> None:
    first_batch, first_expected = chat(conversations=30, messages=1500, prefix="term")
    second_batch, second_expected = chat(conversations=30, messages=1500, prefix="int")
    await create_topics(kafka.bootstrap, topics)
    db = Database(sqlite_url)

    produce(kafka.bootstrap, topics.input, first_batch)
    first = vigil.daemon(kafka.bootstrap, topics, sqlite_url)
    stored = await interrupt_mid_stream(first, db, signal.SIGTERM, first_expected, 300)

    second = vigil.daemon(kafka.bootstrap, topics, sqlite_url)
    await db.reach("message", 1500, second, timeout_s=40)
    # The first process committed what it had stored before exiting: nothing was read twice, nothing skipped.
    assert second.metric("vigil_events_consumed_total", type="message") == 1500 - stored
    assert second.metric("vigil_events_duplicate_total", type="message") == 0
    produce(kafka.bootstrap, topics.input, second_batch)
    stored = await interrupt_mid_stream(second, db, signal.SIGINT, first_expected | second_expected, 1800)

    third = vigil.daemon(kafka.bootstrap, topics, sqlite_url)
    await db.reach("message", 3000, third, timeout_s=40)
    assert third.metric("vigil_events_consumed_total", type="message") == 3000 - stored
    assert third.metric("vigil_events_duplicate_total", type="message") == 0
    third.stop()
    db.assert_stored_once(first_expected | second_expected)


async def test_a_second_signal_during_the_drain_exits_at_once_and_loses_nothing(
    vigil: VigilCli, kafka: EmbeddedBroker, topics: Topics, pg_url: str
) -> None:
    before, before_expected = chat(conversations=3, messages=30, prefix="calm")
    stuck, stuck_expected = chat(conversations=3, messages=30, prefix="stuck")
    await create_topics(kafka.bootstrap, topics)
    db = Database(pg_url)
    # A drain that could only end at the graceful timeout, far beyond the wait for the exit below.
    daemon = vigil.daemon(kafka.bootstrap, topics, pg_url, VIGIL_GRACEFUL_TIMEOUT_S="300")
    produce(kafka.bootstrap, topics.input, before)
    await db.reach("message", len(before), daemon)

    with psycopg.connect(db.dsn) as lock:
        # Hold the message table: the next records stay in flight, retried, until the lock goes.
        lock.execute("LOCK TABLE message IN ACCESS EXCLUSIVE MODE")
        produce(kafka.bootstrap, topics.input, stuck)
        await eventually(
            "records stuck in flight", lambda: daemon.metric("vigil_events_in_flight") > 0, timeout_s=20, process=daemon
        )
        daemon.send(signal.SIGINT)
        await eventually("the drain started", lambda: "records in flight" in daemon.log(), timeout_s=10, process=daemon)
        daemon.check_alive()  # still draining: the work in flight cannot finish while the table is locked
        daemon.send(signal.SIGTERM)
        code = daemon.wait(timeout_s=20)
        assert code != 0, "a second signal is an abort, not a clean exit"
        assert "second signal" in daemon.log()
        lock.rollback()

    # Nothing in flight was committed as done: a new process takes it up, and each message is stored once.
    again = vigil.daemon(kafka.bootstrap, topics, pg_url)
    await db.reach("message", len(before) + len(stuck), again, timeout_s=60)
    again.stop()
    db.assert_stored_once(before_expected | stuck_expected)
