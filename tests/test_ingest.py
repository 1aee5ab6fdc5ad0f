"""Ingest over the in-process transport: order per conversation, concurrency, dead letters, acks, drain."""

from __future__ import annotations

import asyncio
import json
import random
from collections import defaultdict
from collections.abc import Sequence

from prometheus_client import CollectorRegistry

from tests.conftest import wait_for
from vigil.backoff import Backoff
from vigil.cases import CaseState
from vigil.clock import SystemClock
from vigil.errors import StoreUnavailable
from vigil.events import CaseEvent, Feedback, Message, SuggestionKind
from vigil.gate import ConfidenceGate
from vigil.ingest import Ingest
from vigil.live import LiveFeed
from vigil.metrics import Metrics
from vigil.pipeline import Pipeline
from vigil.settings import IngestSettings
from vigil.skills import Proposal, Skill
from vigil.store import CaseStore
from vigil.transport import Record
from vigil.transport.memory import MemorySink, MemorySource


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

    async def propose(self, event: Message | CaseEvent | Feedback, case: CaseState | None) -> Sequence[Proposal]:
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

    async def propose(self, event: Message | CaseEvent | Feedback, case: CaseState | None) -> Sequence[Proposal]:
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
    feed: LiveFeed | None = None,
):
    metrics = Metrics(CollectorRegistry())
    clock = SystemClock()
    backoff = Backoff(clock, metrics, 0.01, 0.05)
    sink = MemorySink()
    pipeline = Pipeline(
        store=store,
        skills=skills,
        gate=ConfidenceGate(min_confidence),
        sinks=[sink],
        clock=clock,
        metrics=metrics,
        backoff=backoff,
        default_tenant="default",
        feed=feed,
    )
    source = MemorySource()
    ingest = Ingest(
        sources=[source],
        pipeline=pipeline,
        settings=IngestSettings(max_in_flight=max_in_flight),
        clock=clock,
        metrics=metrics,
        backoff=backoff,
    )
    return source, sink, ingest, metrics


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

    async def propose(self, event: Message | CaseEvent | Feedback, case: CaseState | None) -> Sequence[Proposal]:
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


async def test_bad_records_are_dead_lettered_and_the_rest_goes_on(store: CaseStore):
    source, _, ingest, metrics = build(store, [])
    source.put(
        [
            record(message(1, "a", tenant="acme")),
            record(b"{oops"),
            record(message(2, "a")),
            record(message(3, "a", tenant="globex")),
            record(b"[]"),
            record(message(4, "a")),
        ]
    )
    await ingest.run()
    await ingest.drain(5)
    reasons = [rejection.reason for _, rejection in source.dead_letters]
    assert sorted(reasons) == ["invalid_json", "not_an_object", "tenant_mismatch"]
    assert len(source.acked) == 6  # dead-lettered records are acknowledged too: they are handled
    view = await store.conversation("a")
    assert view is not None and [m.message_id for m in view.messages] == ["a-1", "a-2", "a-4"]
    assert value(metrics, "vigil_events_dead_lettered_total", reason="tenant_mismatch") == 1


async def test_suggestions_pass_the_gate_are_stored_and_published(store: CaseStore):
    source, sink, ingest, metrics = build(store, [Echo(delay_s=0.05)], min_confidence=0.5)
    source.put(
        [record(message(1, "a", "conf=0.9")), record(message(2, "a", "conf=0.2")), record(message(3, "a", "hello"))]
    )
    await ingest.run()
    await ingest.drain(5)
    assert [s.text for s in sink.published] == ["re: conf=0.9"]
    published = sink.published[0]
    assert published.in_reply_to == "a-1" and published.tenant == "default"
    assert published.latency_ms >= 50  # from the record's arrival: it includes the skill's 50 ms
    assert value(metrics, "vigil_suggestions_suppressed_total", reason="low_confidence") == 1
    assert value(metrics, "vigil_suggestions_published_total", kind="answer") == 1
    view = await store.conversation("a")
    assert view is not None and [s.suggestion_id for s in view.suggestions] == [published.suggestion_id]
    assert await store.unpublished_replies("a-1") == []


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


async def test_a_failing_skill_is_counted_and_the_event_still_stored(store: CaseStore):
    source, sink, ingest, metrics = build(store, [Echo()])
    source.put([record(message(1, "a", "boom")), record(message(2, "a", "conf=0.8"))])
    await ingest.run()
    await ingest.drain(5)
    assert value(metrics, "vigil_skill_failures_total", skill="echo") == 1
    assert len(sink.published) == 1
    assert len(source.acked) == 2


class Stuck:
    name = "stuck"
    kind: SuggestionKind = "answer"

    async def propose(self, event: Message | CaseEvent | Feedback, case: CaseState | None) -> Sequence[Proposal]:
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
    source, sink, ingest, metrics = build(store, [Echo()])
    ingest._pipeline._gate = FlakyGate()  # type: ignore[attr-defined]
    source.put([record(message(1, "a", "conf=0.9"))])
    await ingest.run()
    assert await ingest.drain(5)
    assert source.dead_letters == [] and len(source.acked) == 1
    assert [s.text for s in sink.published] == ["re: conf=0.9"]
    assert value(metrics, "vigil_retries_total", dependency="database") == 1


async def test_feedback_is_counted_by_kind_and_verdict_and_everything_goes_out_live(store: CaseStore):
    feed = LiveFeed()
    source, sink, ingest, metrics = build(store, [Echo()], feed=feed)
    with feed.watch(tenants=("acme",)) as watcher:
        source.put([record(message(1, "c-1", "conf=0.9", tenant="acme"), 0)])
        await ingest.run()
        assert await ingest.drain(5)
        (suggestion,) = sink.published
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
        source.put([record(json.dumps(verdict).encode(), 1), record(json.dumps(verdict).encode(), 2)])  # re-sent
        await ingest.run()
        assert await ingest.drain(5)
        updates = [watcher.queue.get_nowait() for _ in range(watcher.queue.qsize())]
    assert [u.kind for u in updates if u] == ["message", "suggestion", "feedback"]
    assert updates[2] is not None and updates[2].data["feedback"]["verdict"] == "dismissed"
    assert value(metrics, "vigil_feedback_total", kind="answer", verdict="dismissed") == 1
