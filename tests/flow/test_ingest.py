"""Ingest over the in-process transport: order per conversation, concurrency, dead letters, acks, drain."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry

from tests.cases.test_store import set_fault, with_fault
from tests.chroma import ChromaServer
from tests.conftest import PG_ADMIN, case_store, help_centre, make_settings, views_of, wait_for
from vigil.answers.settings import AnswerSettings
from vigil.answers.skill import AnswerSkill
from vigil.cases.store import CaseStore
from vigil.cases.views import CaseViews
from vigil.core.clock import SystemClock
from vigil.core.errors import Rejected, StoreUnavailable, TransportUnavailable
from vigil.core.metrics import Metrics
from vigil.core.retry import Backoff
from vigil.flow.case import CaseState
from vigil.flow.gates import ConfidenceGate, Decision, Gate, Gates
from vigil.flow.ingest import Ingest
from vigil.flow.pipeline import Pipeline
from vigil.flow.settings import IngestSettings
from vigil.flow.skills import Proposal, Skill
from vigil.flow.tenure import SqlTenures
from vigil.knowledge.store import KnowledgeStore
from vigil.testing import Wired, wired
from vigil.transport.base import Record
from vigil.transport.memory import MemoryDelivery, MemorySink, MemorySource
from vigil.wire.events import Event, Message, SuggestionKind


def record(value: bytes, offset: int = 0) -> Record:
    return Record(value=value, key=None, origin={"offset": str(offset)})


def message(n: int, conversation: str, text: str = "hello", **extra: object) -> bytes:
    return json.dumps(
        {
            "type": "message",
            "schema_version": 1,
            "message_id": f"{conversation}-{n}",
            "conversation_id": conversation,
            "sent_at": "2026-11-02T09:00:00Z",
            "role": "customer",
            "text": text,
            **extra,
        }
    ).encode()


class OrderWitness:
    """A skill that sleeps a random moment and notes the order it saw each conversation's messages in."""

    name = "witness"
    kind: SuggestionKind = "answer"

    def __init__(self) -> None:
        self.seen: dict[str, list[str]] = defaultdict(list)
        self.running: set[str] = set()
        self.max_parallel = 0
        self.overlap = False

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        if event.conversation_id in self.running:
            self.overlap = True
        self.running.add(event.conversation_id)
        self.max_parallel = max(self.max_parallel, len(self.running))
        await asyncio.sleep(random.uniform(0, 0.005))
        self.seen[event.conversation_id].append(event.id)
        self.running.discard(event.conversation_id)
        return ()


class Echo:
    """A skill that proposes one answer per customer message, with the confidence in its text."""

    name = "echo"
    kind: SuggestionKind = "answer"

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        await asyncio.sleep(self.delay_s)
        if isinstance(event, Message) and event.text.startswith("conf="):
            return (Proposal(kind="answer", text=f"re: {event.text}", confidence=float(event.text[5:])),)
        if isinstance(event, Message) and event.text == "boom":
            raise RuntimeError("skill bug")
        return ()


def build(
    store: CaseStore,
    skills: Sequence[Skill],
    *,
    max_in_flight: int = 64,
    min_confidence: float = 0.5,
    gate: Gate | None = None,
    gates: Gates | None = None,
    source: MemorySource | None = None,
    dead_letter_attempts: int = 10,
    reachable: Callable[[], bool] = lambda: True,
):
    metrics = Metrics(CollectorRegistry())
    clock = SystemClock()
    backoff = Backoff(clock, metrics, 0.01, 0.05)
    sink = MemorySink()
    pipeline = Pipeline(
        recorder=store,
        skills=skills,
        gates=gates or Gates.of(gate or ConfidenceGate(min_confidence)),
        sinks=[sink],
        clock=clock,
        metrics=metrics,
        backoff=backoff,
        default_tenant="default",
    )
    source = source or MemorySource()
    ingest = Ingest(
        sources=[source],
        pipeline=pipeline,
        settings=IngestSettings(max_in_flight=max_in_flight, dead_letter_attempts=dead_letter_attempts),
        clock=clock,
        metrics=metrics,
        backoff=backoff,
        reachable=reachable,
    )
    return source, sink, ingest, metrics


def wired_on(db_url: str, tmp_path: Path, skills: Sequence[Skill]) -> contextlib.AbstractAsyncContextManager[Wired]:
    """The pipeline composed as the daemon composes it (answers off: the base rule gates), on ``db_url``."""
    settings = make_settings(tmp_path=tmp_path, db_url=db_url, answers={"enabled": False, "min_confidence": 0.5})
    return wired(tmp_path / "data", settings=settings, skills=skills, clock=SystemClock())


def value(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


async def test_conversations_run_concurrently_but_each_in_order(store: CaseStore):
    witness = OrderWitness()
    source, _, ingest, metrics = build(store, [witness])
    produced: dict[str, list[str]] = defaultdict(list)
    for n in range(300):
        conversation = f"c{n % 12}"
        produced[conversation].append(f"{conversation}-{n}")
        source.put([record(message(n, conversation), n)])
    await ingest.run()
    assert await ingest.drain(5)
    assert dict(witness.seen) == dict(produced)
    assert not witness.overlap, "two events of one conversation were processed at the same time"
    assert witness.max_parallel > 1, "conversations were not processed concurrently"
    assert len(source.acked) == 300
    assert value(metrics, "vigil_events_consumed_total", type="message") == 300


class Turnstile:
    """A skill that holds every event until the test lets it through, and notes how many it held at once."""

    name = "turnstile"
    kind: SuggestionKind = "answer"

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.holding = 0
        self.max_holding = 0
        self.passed = 0

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        self.holding += 1
        self.max_holding = max(self.max_holding, self.holding)
        try:
            await self.open.wait()
        finally:
            self.holding -= 1
        self.passed += 1
        return ()


async def test_in_flight_is_bounded(store: CaseStore):
    turnstile = Turnstile()
    source, _, ingest, _ = build(store, [turnstile], max_in_flight=3)
    source.put(record(message(n, f"c{n}"), n) for n in range(40))
    running = asyncio.create_task(ingest.run())
    # Forty independent conversations are waiting: the bound, and only the bound, is taken up.
    await wait_for(lambda: turnstile.holding == 3, 5)
    for _ in range(20):  # give a fourth event every chance to slip in
        await asyncio.sleep(0)
    assert turnstile.holding == 3 and len(source.acked) == 0
    turnstile.open.set()
    await running
    assert await ingest.drain(5)
    assert turnstile.passed == 40 and len(source.acked) == 40
    assert turnstile.max_holding == 3


async def test_bad_records_are_dead_lettered_and_the_rest_goes_on(db_url: str, tmp_path: Path):
    async with wired_on(db_url, tmp_path, []) as vigil:
        await vigil.send(
            message(1, "a", tenant="acme"),
            b"{oops",
            message(2, "a"),
            message(3, "a", tenant="globex"),
            b"[]",
            message(4, "a"),
        )
        reasons = [rejection.reason for _, rejection in vigil.dead_letters]
        assert sorted(reasons) == ["invalid_json", "not_an_object", "tenant_mismatch"]
        assert len(vigil.source.acked) == 6  # dead-lettered records are acknowledged too: they are handled
        view = await vigil.views.conversation("a")
        assert view is not None and [m.message_id for m in view.messages] == ["a-4", "a-2", "a-1"]
        assert vigil.sample("vigil_events_dead_lettered_total", reason="tenant_mismatch") == 1


async def test_suggestions_pass_the_gate_are_stored_and_published(db_url: str, tmp_path: Path):
    async with wired_on(db_url, tmp_path, [Echo(delay_s=0.05)]) as vigil:
        await vigil.send(message(1, "a", "conf=0.9"), message(2, "a", "conf=0.2"), message(3, "a", "hello"))
        assert [s.text for s in vigil.published] == ["re: conf=0.9"]
        published = vigil.published[0]
        assert published.in_reply_to == "a-1" and published.tenant == "default"
        assert published.latency_ms >= 50  # from the record's arrival: it includes the skill's 50 ms
        assert vigil.sample("vigil_suggestions_suppressed_total", reason="low_confidence") == 1
        assert vigil.sample("vigil_suggestions_published_total", kind="answer") == 1
        view = await vigil.views.conversation("a")
        assert view is not None and [s.suggestion_id for s in view.suggestions] == [published.suggestion_id]
        assert await vigil.store.unpublished_replies("a", "a-1") == []


async def test_a_redelivered_event_publishes_only_what_was_left_unpublished(store: CaseStore):
    source, sink, ingest, metrics = build(store, [Echo()])
    source.put([record(message(1, "a", "conf=0.9"))])
    await ingest.run()
    await ingest.drain(5)
    first = sink.published[0]
    # Simulate a crash between storing and publishing: the stored suggestion is not marked published.
    async with store.engine.begin() as conn:
        from sqlalchemy import text

        await conn.execute(text("UPDATE suggestion SET published_at = NULL"))
    source2, sink2, ingest2, metrics2 = build(store, [Echo()])
    source2.put([record(message(1, "a", "conf=0.9")), record(message(1, "a", "conf=0.9"))])
    await ingest2.run()
    await ingest2.drain(5)
    assert [s.suggestion_id for s in sink2.published] == [first.suggestion_id]  # once, same id
    assert value(metrics2, "vigil_events_duplicate_total", type="message") == 2


async def test_a_failing_skill_is_counted_and_the_event_still_stored(db_url: str, tmp_path: Path):
    async with wired_on(db_url, tmp_path, [Echo()]) as vigil:
        await vigil.send(message(1, "a", "boom"), message(2, "a", "conf=0.8"))
        assert vigil.sample("vigil_skill_failures_total", skill="echo") == 1
        assert len(vigil.published) == 1
        view = await vigil.views.conversation("a")
        assert view is not None and len(view.messages) == 2


class Unreachable:
    """A skill whose own reads (of the case database, say) cannot reach it."""

    name = "unreachable"
    kind: SuggestionKind = "answer"

    def __init__(self) -> None:
        self.asked = 0

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        self.asked += 1
        raise StoreUnavailable("the database is unavailable: timed out")


async def test_a_skill_a_dependency_fails_is_asked_a_few_times_then_silent_with_its_reason_never_a_failure(
    store: CaseStore,
):
    skill = Unreachable()
    source, sink, ingest, metrics = build(store, [skill, Echo()])
    source.put([record(message(1, "a", "conf=0.9"))])
    await ingest.run()
    assert await ingest.drain(5)
    assert skill.asked == 3
    assert value(metrics, "vigil_suggestions_suppressed_total", reason="database_unavailable") == 1
    assert value(metrics, "vigil_retries_total", dependency="database") == 2
    assert value(metrics, "vigil_skill_failures_total", skill="unreachable") == 0
    assert [s.text for s in sink.published] == ["re: conf=0.9"] and source.dead_letters == []


class Stuck:
    name = "stuck"
    kind: SuggestionKind = "answer"

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        await asyncio.sleep(3600)
        return ()


async def test_drain_gives_up_after_the_timeout_without_acknowledging(store: CaseStore):
    source, _, ingest, _ = build(store, [Stuck()])
    source.put([record(message(1, "a"))])
    await ingest.run()
    assert not await ingest.drain(0.2)
    assert source.acked == []


class FlakyGate(ConfidenceGate):
    """A gate whose database read fails for a passing reason the first time (the loop was saturated)."""

    def __init__(self) -> None:
        super().__init__(0.5)
        self.failures = 1

    async def admit(self, kind, event, case):  # type: ignore[no-untyped-def]
        if self.failures:
            self.failures -= 1
            raise StoreUnavailable("database unavailable: timed out")
        return await super().admit(kind, event, case)


async def test_a_passing_failure_is_retried_never_dead_lettered(store: CaseStore):
    source, sink, ingest, metrics = build(store, [Echo()], gate=FlakyGate())
    source.put([record(message(1, "a", "conf=0.9"))])
    await ingest.run()
    assert await ingest.drain(5)
    assert source.dead_letters == [] and len(source.acked) == 1
    assert [s.text for s in sink.published] == ["re: conf=0.9"]
    assert value(metrics, "vigil_retries_total", dependency="database") == 1


async def test_feedback_is_counted_by_kind_and_verdict_and_everything_goes_out_live(db_url: str, tmp_path: Path):
    async with wired_on(db_url, tmp_path, [Echo()]) as vigil:
        with vigil.feed.watch(tenants=("acme",)) as watcher:
            await vigil.send(message(1, "c-1", "conf=0.9", tenant="acme"))
            (suggestion,) = vigil.published
            verdict = {
                "type": "feedback",
                "schema_version": 1,
                "feedback_id": "f-1",
                "suggestion_id": suggestion.suggestion_id,
                "conversation_id": "c-1",
                "verdict": "dismissed",
                "by": "ana",
                "at": "2026-11-02T09:01:00Z",
            }
            await vigil.send(json.dumps(verdict).encode(), json.dumps(verdict).encode())  # re-sent
            updates = [watcher.queue.get_nowait() for _ in range(watcher.queue.qsize())]
            assert [u.kind for u in updates if u] == ["message", "suggestion", "feedback"]
            assert updates[2] is not None and updates[2].data["feedback"]["verdict"] == "dismissed"
            assert vigil.sample("vigil_feedback_total", kind="answer", verdict="dismissed") == 1


# --- The store's failures through ingest: what passes is retried, a refusal or a bug is dead-lettered ---


@contextlib.asynccontextmanager
async def pg_store(pg_url: str, tmp_path: Path) -> AsyncIterator[CaseStore]:
    built = case_store(make_settings(tmp_path=tmp_path, db_url=pg_url))
    await built.migrate()
    try:
        yield built
    finally:
        await built.close()


async def test_a_deadlock_is_retried_until_it_passes_and_the_event_is_stored_not_dead_lettered(
    pg_url: str, tmp_path: Path
):
    async with pg_store(pg_url, tmp_path) as store:
        await with_fault(store)
        await set_fault(store, "40P01")
        source, sink, ingest, metrics = build(store, [Echo()])
        source.put([record(message(1, "a", "conf=0.9"))])
        await ingest.run()
        await wait_for(lambda: value(metrics, "vigil_retries_total", dependency="database") >= 3)
        assert source.acked == [] and source.dead_letters == []  # held, not given up on
        await set_fault(store, None)
        assert await ingest.drain(10)
        assert source.dead_letters == [] and len(source.acked) == 1
        view = await views_of(store).conversation("a")
        assert view is not None and [m.message_id for m in view.messages] == ["a-1"]
        assert [s.text for s in sink.published] == ["re: conf=0.9"]


async def refuse_texts(store: CaseStore, prefix: str) -> None:
    """A trigger that refuses messages whose text starts with ``prefix``; PostgreSQL's error quotes the text, as
    its data errors quote the values they refuse."""
    async with store.engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            await conn.exec_driver_sql(
                f"CREATE TRIGGER refuse BEFORE INSERT ON message WHEN NEW.text LIKE '{prefix}%'"
                " BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
            return
        await conn.exec_driver_sql(
            f"""CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              IF NEW.text LIKE '{prefix}%' THEN
                RAISE EXCEPTION 'refused %', NEW.text USING ERRCODE = '23514';
              END IF;
              RETURN NEW;
            END $$"""
        )
        await conn.exec_driver_sql(
            "CREATE TRIGGER refuse BEFORE INSERT ON message FOR EACH ROW EXECUTE FUNCTION refuse()"
        )


async def test_a_refused_event_is_dead_lettered_as_store_rejected_naming_ids_never_its_text(
    store: CaseStore, views: CaseViews, caplog: pytest.LogCaptureFixture
):
    await refuse_texts(store, "refuse")
    secret = "refuse: my card is 4111 1111 1111 1111"
    source, sink, ingest, metrics = build(store, [Echo()])
    source.put([record(message(1, "a", secret), 0), record(message(2, "a", "conf=0.9"), 1)])
    with caplog.at_level(logging.INFO):
        await ingest.run()
        assert await ingest.drain(5)
    ((dead, rejection),) = source.dead_letters
    assert json.loads(dead.value)["message_id"] == "a-1"
    assert rejection.reason == "store_rejected"
    assert "4111" not in rejection.detail, rejection.detail
    assert "4111" not in caplog.text
    assert any("a-1" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)  # ids, though
    assert len(source.acked) == 2
    view = await views.conversation("a")
    assert view is not None and [m.message_id for m in view.messages] == ["a-2"]  # the next one went on
    assert [s.text for s in sink.published] == ["re: conf=0.9"]
    assert value(metrics, "vigil_events_dead_lettered_total", reason="store_rejected") == 1


class BuggyGate(ConfidenceGate):
    """A gate with a bug that shows on one event."""

    async def review(self, proposal, event, case):  # type: ignore[no-untyped-def]
        if event.id == "a-1":
            raise KeyError("gate bug")
        return await super().review(proposal, event, case)


async def test_a_bug_on_an_event_dead_letters_it_as_processing_failed_and_the_rest_goes_on(
    store: CaseStore, caplog: pytest.LogCaptureFixture
):
    # A skill that raises is counted and skipped (test_a_failing_skill_is_counted...): a bug elsewhere is not.
    source, sink, ingest, metrics = build(store, [Echo()], gate=BuggyGate(0.5))
    source.put([record(message(1, "a", "conf=0.9"), 0), record(message(2, "a", "conf=0.8"), 1)])
    with caplog.at_level(logging.ERROR):
        await ingest.run()
        assert await ingest.drain(5)
    ((dead, rejection),) = source.dead_letters
    assert json.loads(dead.value)["message_id"] == "a-1" and rejection.reason == "processing_failed"
    assert any(r.exc_info and isinstance(r.exc_info[1], KeyError) for r in caplog.records), "the bug is not logged"
    assert len(source.acked) == 2
    assert [s.text for s in sink.published] == ["re: conf=0.8"]
    assert value(metrics, "vigil_events_dead_lettered_total", reason="processing_failed") == 1


async def test_feedback_on_another_conversations_suggestion_is_dead_lettered_with_the_reason(
    db_url: str, tmp_path: Path
):
    async with wired_on(db_url, tmp_path, [Echo()]) as vigil:
        await vigil.send(message(1, "a", "conf=0.9", tenant="acme"), message(1, "b", "hi", tenant="acme"))
        (suggestion,) = vigil.published
        verdict = {
            "type": "feedback",
            "schema_version": 1,
            "suggestion_id": suggestion.suggestion_id,
            "verdict": "rejected",
            "at": "2026-11-02T09:01:00Z",
        }
        await vigil.send(
            json.dumps({**verdict, "feedback_id": "f-1", "conversation_id": "b"}).encode(),
            json.dumps({**verdict, "feedback_id": "f-2", "conversation_id": "b", "tenant": "globex"}).encode(),
        )
        reasons = sorted(rejection.reason for _, rejection in vigil.dead_letters)
        assert reasons == ["address_mismatch", "tenant_mismatch"]
        assert vigil.sample("vigil_feedback_total", kind="answer", verdict="rejected") == 0


async def test_two_conversations_reusing_a_message_id_each_get_their_own_suggestion(store: CaseStore, views: CaseViews):
    source, sink, ingest, _ = build(store, [Echo()])
    same_id = {"message_id": "m-1"}
    source.put(
        [
            record(message(1, "acme-c", "conf=0.9", tenant="acme", **same_id), 0),
            record(message(1, "globex-c", "conf=0.8", tenant="globex", **same_id), 1),
        ]
    )
    await ingest.run()
    assert await ingest.drain(5)
    assert len({s.suggestion_id for s in sink.published}) == 2
    for conversation, tenant, text in (("acme-c", "acme", "re: conf=0.9"), ("globex-c", "globex", "re: conf=0.8")):
        view = await views.conversation(conversation)
        assert view is not None and view.tenant == tenant and [m.message_id for m in view.messages] == ["m-1"]
        assert [(s.text, s.tenant) for s in view.suggestions] == [(text, tenant)], conversation


# --- A database outage in the middle of a run, and the recovery ---


def _admin(sql: str) -> None:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(sql)


async def test_a_database_outage_mid_run_loses_nothing_and_dead_letters_nothing(pg_url: str, tmp_path: Path):
    database = sa.make_url(pg_url).database
    conversations, per_conversation = 12, 40
    total = conversations * per_conversation
    async with pg_store(pg_url, tmp_path) as store:
        source, sink, ingest, metrics = build(store, [Echo()], max_in_flight=8)
        produced: dict[str, list[str]] = defaultdict(list)
        for n in range(total):
            conversation = f"c{n % conversations}"
            produced[conversation].append(f"{conversation}-{n}")
            source.put([record(message(n, conversation, "conf=0.9" if n % 5 == 0 else "hi"), n)])
        run = asyncio.create_task(ingest.run())
        await wait_for(lambda: len(source.acked) >= total // 5)
        try:
            # The outage: running sessions killed, new ones turned away, while events keep coming.
            _admin(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
            _admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}'")
            acked_at_outage = len(source.acked)
            retries = value(metrics, "vigil_retries_total", dependency="database")
            await wait_for(lambda: value(metrics, "vigil_retries_total", dependency="database") >= retries + 20)
            assert len(source.acked) < total, "the outage came after the run"
        finally:
            _admin(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
        await run
        assert await ingest.drain(60)
        assert source.dead_letters == []
        assert len(source.acked) == total and acked_at_outage < total
        async with views_of(store).reading() as conn:
            rows = (await conn.execute(sa.text("SELECT conversation_id, message_id FROM message ORDER BY seq"))).all()
        stored: dict[str, list[str]] = defaultdict(list)
        for conversation, message_id in rows:
            stored[conversation].append(message_id)
        assert len(rows) == total and dict(stored) == dict(produced)  # each once, each conversation in order
        assert value(metrics, "vigil_events_consumed_total", type="message") == total


# --- A dead letter waits out a broker outage: only failures while the broker answers use up its attempts ---


class DeadLettersWhileUp(MemorySource):
    """A source whose dead-letter destination fails while ``down`` (the broker away), counting the tries."""

    def __init__(self) -> None:
        super().__init__()
        self.down = True
        self.tries = 0

    async def deliveries(self) -> AsyncIterator[MemoryDelivery]:
        async for delivery in super().deliveries():
            yield FailingWhileDown(delivery.record, self)


class FailingWhileDown(MemoryDelivery):
    async def dead_letter(self, rejection: Rejected) -> None:
        assert isinstance(self.source, DeadLettersWhileUp)
        self.source.tries += 1
        if self.source.down:
            raise TransportUnavailable("the broker is not reachable")
        await super().dead_letter(rejection)


async def test_a_dead_letter_outlasts_a_broker_outage_longer_than_its_attempts(store: CaseStore):
    source = DeadLettersWhileUp()
    _, _, ingest, metrics = build(store, [], source=source, dead_letter_attempts=3, reachable=lambda: not source.down)
    source.put([record(b"not json", 0), record(message(1, "after-outage"), 1)])
    await ingest.run()
    await wait_for(lambda: source.tries >= 10)  # ten failed tries while the broker is away
    # held, not skipped: the record stays unacknowledged (its offset uncommitted) while the broker is away
    assert source.dead_letters == [] and b"not json" not in [r.value for r in source.acked]
    source.down = False
    assert await ingest.drain(10)
    assert [rejection.reason for _, rejection in source.dead_letters] == ["invalid_json"]
    assert value(metrics, "vigil_dead_letter_failures_total", reason="invalid_json") == 0
    assert len(source.acked) == 2


async def test_a_dead_letter_failing_while_the_broker_answers_is_counted_after_its_attempts(store: CaseStore):
    source = DeadLettersWhileUp()
    _, _, ingest, metrics = build(store, [], source=source, dead_letter_attempts=3, reachable=lambda: True)
    source.put([record(b"not json", 0), record(message(1, "after-refusal"), 1)])
    await ingest.run()
    assert await ingest.drain(10)
    assert source.tries == 3 and source.dead_letters == []
    assert value(metrics, "vigil_dead_letter_failures_total", reason="invalid_json") == 1
    assert len(source.acked) == 2  # let go: the partition moves on


class Stale(ConfidenceGate):
    """A kind's gate that finds every suggestion too late to publish."""

    def timely(self, event: Event, *, superseded: bool) -> Decision:
        return Decision.silence("stale")


class NextStep(Echo):
    name = "next-step"
    kind: SuggestionKind = "next_step"

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        return [replace(p, kind="next_step", text=f"next: {p.text}") for p in await super().propose(event, case)]


async def test_each_kind_is_asked_of_its_own_chain_and_its_silence_counted_by_reason(store: CaseStore):
    gates = Gates({"answer": [Stale(0.5)]}, base=ConfidenceGate(0.5))
    source, sink, ingest, metrics = build(store, [Echo(), NextStep()], gates=gates)
    source.put([record(message(1, "a", "conf=0.9"))])
    await ingest.run()
    assert await ingest.drain(5)
    assert [(s.kind, s.text) for s in sink.published] == [("next_step", "next: re: conf=0.9")]
    assert value(metrics, "vigil_suggestions_suppressed_total", reason="stale") == 1


# --- A knowledge outage: the answer skill stays silent for a bounded time, counted, never a failure ---


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_chroma_outage_silences_answers_as_knowledge_unavailable_never_a_skill_failure_or_a_dead_letter(
    store: CaseStore, tmp_path: Path, embedder, chroma: ChromaServer
):  # type: ignore[no-untyped-def]
    knowledge = KnowledgeStore(
        engine=store.engine,
        embedder=embedder,
        clock=SystemClock(),
        chroma_path=tmp_path / "chroma",
        chroma_url=chroma.url,
    )
    await knowledge.open()
    await knowledge.upsert(help_centre())
    source = MemorySource(finite=False)
    _, sink, ingest, metrics = build(
        store, [AnswerSkill(knowledge, AnswerSettings())], min_confidence=0.0, source=source
    )
    run = asyncio.create_task(ingest.run())
    question = "How do I set up an eSIM on my phone?"
    try:
        source.put([record(message(1, "a", question), 1)])
        await wait_for(lambda: len(source.acked) == 1)
        assert len(sink.published) == 1

        chroma.stop()
        started = time.monotonic()
        source.put([record(message(2, "a", question), 2)])
        await wait_for(lambda: len(source.acked) == 2)
        assert time.monotonic() - started < 5  # a few back-off attempts, not the outage's length
        assert len(sink.published) == 1 and source.dead_letters == []
        assert value(metrics, "vigil_suggestions_suppressed_total", reason="knowledge_unavailable") == 1
        assert value(metrics, "vigil_retries_total", dependency="knowledge") == 2
        assert value(metrics, "vigil_skill_failures_total", skill="answers") == 0
        assert (await views_of(store).count_events())["messages"] == 2

        chroma.start()
        source.put([record(message(3, "a", question), 3)])
        await wait_for(lambda: len(source.acked) == 3)
        assert len(sink.published) == 2 and sink.published[-1].in_reply_to == "a-3"
    finally:
        source.stop_intake()
        await run


@dataclass
class Movable:
    """A delivery from a partition that can move to another consumer while it is in flight (as Kafka's can)."""

    record: Record
    acked: bool = False
    dead_letters: list[Rejected] = field(default_factory=list)
    stop: Callable[[], None] | None = None

    def ack(self) -> None:
        self.acked = True

    async def dead_letter(self, rejection: Rejected) -> None:
        self.dead_letters.append(rejection)

    def on_withdrawn(self, stop: Callable[[], None]) -> None:
        self.stop = stop

    def withdraw(self) -> None:
        assert self.stop is not None
        self.stop()


class Partition:
    """A source whose deliveries are ``Movable``: what is put in is delivered, until ``stop_intake``."""

    name = "partition"

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Movable | None] = asyncio.Queue()

    def put(self, *deliveries: Movable) -> None:
        for delivery in deliveries:
            self._queue.put_nowait(delivery)

    async def deliveries(self) -> AsyncIterator[Movable]:
        while (delivery := await self._queue.get()) is not None:
            yield delivery

    def stop_intake(self) -> None:
        self._queue.put_nowait(None)


class HoldsUp:
    """A skill that holds up conversation ``a`` until cancelled, and answers nothing."""

    name = "holds-up"
    kind: SuggestionKind = "answer"

    def __init__(self) -> None:
        self.holding = asyncio.Event()

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        if event.conversation_id == "a":
            self.holding.set()
            await asyncio.sleep(3600)
        return ()


async def test_records_withdrawn_at_a_hand_over_are_stopped_where_they_stand_and_left_unacknowledged(
    store: CaseStore,
):
    skill, partition = HoldsUp(), Partition()
    _, _, ingest, metrics = build(store, [skill], max_in_flight=3)
    ingest._sources = (partition,)  # type: ignore[assignment]
    a1, a2, b1 = (Movable(record(message(n, c), n)) for n, c in ((1, "a"), (2, "a"), (3, "b")))
    partition.put(a1, a2, b1)
    running = asyncio.create_task(ingest.run())
    await asyncio.wait_for(skill.holding.wait(), 5)
    await wait_for(lambda: b1.acked)
    a1.withdraw()  # held up in its skill: stopped there
    a2.withdraw()  # waiting behind it: never started
    c1 = Movable(record(message(4, "c"), 4))
    partition.put(c1)  # the slots the withdrawn held are free again (three in all)
    await wait_for(lambda: c1.acked)
    partition.stop_intake()
    await running
    assert await ingest.drain(1.0), "a withdrawn record was still in flight"
    assert not a1.acked and not a2.acked and not a1.dead_letters and not a2.dead_letters
    assert value(metrics, "vigil_events_let_go_total", how="withdrawn") == 2
    assert value(metrics, "vigil_events_in_flight") == 0
    assert await views_of(store).count_events() == {"conversations": 3, "messages": 3, "case_events": 0}


async def test_a_record_whose_partition_was_given_to_another_consumer_since_is_let_go_not_dead_lettered(
    store: CaseStore,
):
    scope = "kafka:vigil.events/0"
    tenures = SqlTenures(store.engine, holder="vigil-0", clock=SystemClock(), timeout_s=5.0)
    old = (await tenures.take([scope]))[scope]
    new = (await tenures.take([scope]))[scope]  # the partition given again (to another consumer, say)
    partition = Partition()
    _, sink, ingest, metrics = build(store, [Echo()])
    ingest._sources = (partition,)  # type: ignore[assignment]
    stale = Movable(replace(record(message(1, "a", "conf=0.9"), 1), tenure=old))
    current = Movable(replace(record(message(2, "b", "conf=0.9"), 2), tenure=new))
    partition.put(stale, current)
    partition.stop_intake()
    await ingest.run()
    assert await ingest.drain(5)
    assert not stale.acked and not stale.dead_letters and current.acked
    assert value(metrics, "vigil_events_let_go_total", how="fenced") == 1
    assert [s.conversation_id for s in sink.published] == ["b"]
    assert await views_of(store).count_events() == {"conversations": 1, "messages": 1, "case_events": 0}
