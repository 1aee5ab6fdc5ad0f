"""Ingest: from a source's records to the pipeline, concurrently across conversations and in order within one.

Each record is decoded (``events.parse``); a rejected one goes to its transport's dead-letter destination with the
reason, or if that cannot be written within ``dead_letter_attempts`` tries while the broker answers, is counted and
skipped. A valid event
joins its conversation's lane: lanes run concurrently (at most ``max_in_flight`` records in all), each lane one event
at a time in arrival order. A record is acknowledged only once fully handled.

A lane is a queue with one task working through it, started by the first event of a conversation that has nothing in
flight and ended when its queue is empty: the events behind it cost no task of their own.

A record whose partition moves to another consumer while it is in flight is let go, neither finished nor
acknowledged, for the new owner to read again: when the source withdraws it at the hand-over (its handling is
cancelled where it stands, as a crash there would stop it), or when a write made for it is ``Fenced`` (a later
tenure of its partition exists: this consumer was moved on from without knowing it). Its handling runs under the
record's tenure (``vigil.flow.tenure``), which those writes prove.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from vigil.core.clock import Clock
from vigil.core.errors import EventConflict, Fenced, Rejected, StoreError, TransportError
from vigil.core.metrics import Metrics
from vigil.core.retry import Backoff
from vigil.flow.pipeline import Pipeline
from vigil.flow.settings import IngestSettings
from vigil.flow.tenure import holding
from vigil.transport.base import Delivery, Source
from vigil.wire.events import Event, Message, addressed, parse

log = logging.getLogger(__name__)


class Ingest:
    """Feeds sources (Kafka, MQTT, or both) into one pipeline until they stop, then drains.

    One set of lanes serves every source, so a conversation is handled in order even if it arrives on two.
    """

    def __init__(
        self,
        *,
        sources: Sequence[Source],
        pipeline: Pipeline,
        settings: IngestSettings,
        clock: Clock,
        metrics: Metrics,
        backoff: Backoff,
        reachable: Callable[[], bool] = lambda: True,
    ) -> None:
        """``reachable`` says whether the brokers answered their last health check: while they do not, a dead letter
        that fails uses up none of its ``dead_letter_attempts`` (an outage is waited out, not counted as a refusal)."""
        self._sources = tuple(sources)
        self._pipeline = pipeline
        self._settings = settings
        self._clock = clock
        self._metrics = metrics
        self._backoff = backoff
        self._reachable = reachable
        self._slots = asyncio.Semaphore(settings.max_in_flight)
        self._lanes: dict[str, deque[_Work]] = {}  # per conversation, its events in flight: the first is being handled
        self._messages: dict[str, int] = {}  # messages received and not yet handled, per conversation
        self._tasks: set[asyncio.Task[None]] = set()
        self._unfinished = 0  # records started and not yet finished (acknowledged)
        self._consumed = {kind: metrics.events_consumed.labels(kind) for kind in ("message", "case", "feedback")}

    async def run(self) -> None:
        """Take records from every source until their intake stops."""
        async with asyncio.TaskGroup() as group:
            for source in self._sources:
                group.create_task(self._take(source), name=f"vigil-ingest-{source.name}")

    async def _take(self, source: Source) -> None:
        async for delivery in source.deliveries():
            await self._slots.acquire()
            self._start(delivery, self._clock.monotonic())

    def _start(self, delivery: Delivery, received: float) -> None:
        self._metrics.in_flight.inc()
        self._unfinished += 1
        record = delivery.record
        try:
            event = parse(
                record.value,
                max_event_bytes=self._settings.max_event_bytes,
                max_text_bytes=self._settings.max_text_bytes,
            )
            event = addressed(event, tenant=record.tenant, conversation_id=record.conversation_id)
        except Rejected as rejection:
            self._track(asyncio.create_task(self._reject(delivery, rejection, received)))
            return
        consumed = self._consumed.get(event.type)
        (consumed or self._metrics.events_consumed.labels(event.type)).inc()
        key = event.conversation_id
        if isinstance(event, Message):
            self._messages[key] = self._messages.get(key, 0) + 1
        work = _Work(delivery, event, received)
        delivery.on_withdrawn(partial(self._withdraw, work))
        lane = self._lanes.get(key)
        if lane is not None:
            lane.append(work)  # its task takes it when the events ahead of it are done
            return
        lane = self._lanes[key] = deque((work,))
        self._track(asyncio.create_task(self._work_through(key, lane)))

    async def _work_through(self, key: str, lane: deque[_Work]) -> None:
        """Handle a conversation's events one at a time, in arrival order, until its lane is empty."""
        try:
            while lane:
                work = lane[0]
                if work.withdrawn:
                    self._let_go(work.event, "withdrawn")
                else:
                    work.runner = asyncio.current_task()
                    try:
                        await self._process(work.delivery, work.event, work.received)
                    except asyncio.CancelledError:
                        if not work.withdrawn:
                            raise  # the drain at shutdown
                        work.runner.uncancel()
                        self._let_go(work.event, "withdrawn")
                    except Exception:  # _process lets nothing through; should it, the events behind must still go on
                        log.exception("failed on %s %s", work.event.type, work.event.id)
                    work.runner = None
                lane.popleft()
                if isinstance(work.event, Message):
                    self._handled_message(key)
        finally:
            if self._lanes.get(key) is lane:
                del self._lanes[key]

    def _withdraw(self, work: _Work) -> None:
        """The source takes ``work``'s record back: stop handling it where it stands, or skip it when its turn comes."""
        if work.withdrawn:
            return
        work.withdrawn = True
        if work.runner is not None:
            work.runner.cancel()

    def _let_go(self, event: Event, how: str) -> None:
        """Leave ``event``'s record to the consumer its partition moved to: unacknowledged, no longer in flight here."""
        log.info(
            "leaving %s %s to the new owner of its partition (%s)",
            event.type,
            event.id,
            how,
            extra={"conversation_id": event.conversation_id},
        )
        self._metrics.events_let_go.labels(how).inc()
        self._unfinished -= 1
        self._metrics.in_flight.dec()
        self._slots.release()

    def _handled_message(self, key: str) -> None:
        left = self._messages[key] - 1
        if left:
            self._messages[key] = left
        else:
            del self._messages[key]

    def _superseded(self, event: Event) -> Callable[[], bool]:
        """Whether a message newer than ``event`` has arrived in its conversation's lane."""
        own = 1 if isinstance(event, Message) else 0
        return lambda: self._messages.get(event.conversation_id, 0) > own

    def _track(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _process(self, delivery: Delivery, event: Event, received: float) -> None:
        try:
            # handle() is idempotent, so a step that failed for a passing reason is retried whole.
            with holding(delivery.record.tenure):
                await self._backoff.retry(
                    "handling an event", partial(self._pipeline.handle, event, received, self._superseded(event))
                )
        except Fenced:
            self._let_go(event, "fenced")
            return
        except (EventConflict, StoreError) as exc:
            rejection = exc if isinstance(exc, Rejected) else Rejected("store_rejected", str(exc))
            log.warning(
                "dead-lettering %s %s: %s", event.type, event.id, exc, extra={"conversation_id": event.conversation_id}
            )
            await self._dead_letter(delivery, rejection)
        except Exception:
            # A bug, not bad input: the record is kept on the dead-letter topic and the partition moves on.
            log.exception("failed on %s %s", event.type, event.id, extra={"conversation_id": event.conversation_id})
            await self._dead_letter(delivery, Rejected("processing_failed", "vigil failed on this event; see logs"))
        self._finish(delivery, received)

    async def _reject(self, delivery: Delivery, rejection: Rejected, received: float) -> None:
        log.info("rejected a record from %s: %s", delivery.record.origin or "?", rejection)
        await self._dead_letter(delivery, rejection)
        self._finish(delivery, received)

    async def _dead_letter(self, delivery: Delivery, rejection: Rejected) -> None:
        try:
            await self._backoff.retry(
                "dead-lettering a record",
                lambda: delivery.dead_letter(rejection),
                attempts=self._settings.dead_letter_attempts,
                counting=self._reachable,
            )
        except Exception as exc:
            # Holding on to the record would stop its partition for good (every restart would meet it again), so it
            # is let go: counted, and logged with where it came from so that it can be found in the input.
            log.error(
                "cannot dead-letter a record from %s (%s), skipping it: %s",
                delivery.record.origin or "?",
                rejection.reason,
                exc,
                exc_info=not isinstance(exc, TransportError),  # anything else is a bug: show where
            )
            self._metrics.dead_letter_failures.labels(rejection.reason).inc()
            return
        self._metrics.events_dead_lettered.labels(rejection.reason).inc()

    def _finish(self, delivery: Delivery, received: float) -> None:
        delivery.ack()
        self._unfinished -= 1
        self._metrics.in_flight.dec()
        self._metrics.event_processing.observe(self._clock.monotonic() - received)
        self._slots.release()

    async def drain(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for records in flight; cancel what is left. True if all finished."""
        pending = set(self._tasks)
        if pending:
            # Said before the wait, so an operator sees why the process has not exited yet.
            log.info("shutdown: waiting up to %.1fs for %d records in flight", timeout_s, self._unfinished)
            _, pending = await asyncio.wait(pending, timeout=timeout_s)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
            log.warning(
                "shutdown: %d records did not finish in %.1fs; they will be re-delivered", self._unfinished, timeout_s
            )
            self._metrics.in_flight.dec(self._unfinished)
        return not pending


@dataclass(slots=True)
class _Work:
    """A record in its lane: its delivery, its event and when it was received; whether the source has withdrawn it,
    and the task handling it now, if any."""

    delivery: Delivery
    event: Event
    received: float
    withdrawn: bool = False
    runner: asyncio.Task[None] | None = None
