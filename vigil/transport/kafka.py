"""Kafka transport (aiokafka): a consumer-group source with ordered offset commits, a suggestions sink, a DLQ.

At-least-once: an offset is committed only when every record before it in its partition is fully handled, so a
crash or a rebalance re-delivers at most what was in flight, and idempotent processing absorbs the repeats.

A record's key is its address: when it has one, it is the conversation id (UTF-8), so that a conversation stays on
one partition, and a record keyed otherwise is refused (``address_mismatch``). A record without a key is accepted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import (
    InvalidRequestError,
    InvalidTimestampError,
    InvalidTopicError,
    KafkaError,
    MessageSizeTooLargeError,
    PolicyViolationError,
    RecordListTooLargeError,
    UnsupportedForMessageFormatError,
)
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.structs import OffsetAndMetadata

from vigil.core.errors import RecordRefused, Rejected, TransportError, TransportUnavailable
from vigil.core.metrics import Metrics
from vigil.transport.base import Record, Tenure, TenureBook, dead_letter_headers, truncation_headers
from vigil.transport.settings import KafkaSettings
from vigil.wire.events import Suggestion

log = logging.getLogger(__name__)

TOPIC_ALREADY_EXISTS = 36
MAX_REQUEST_BYTES = 1024 * 1024
"""The largest record the producer sends (aiokafka's default ``max_request_size``; Kafka's brokers take as much)."""

# Errors about the record itself: sending the same record again gets the same answer. Anything else (timeouts, an
# unreachable or restarting broker, a topic not there yet, authorisation, a record corrupted on the way) may pass and
# is retried.
REFUSALS: tuple[type[KafkaError], ...] = (
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    InvalidTimestampError,
    InvalidTopicError,
    InvalidRequestError,
    PolicyViolationError,
    UnsupportedForMessageFormatError,
)

Headers = list[tuple[str, bytes]]


class KafkaPublisher:
    """One producer shared by the suggestions sink and the dead-letter queue."""

    def __init__(self, settings: KafkaSettings) -> None:
        self._settings = settings
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> None:
        """Connect the producer. Raises ``TransportError`` if the broker is unreachable."""
        producer = AIOKafkaProducer(
            bootstrap_servers=self._settings.bootstrap_servers,
            client_id=self._settings.client_id,
            acks="all",
            enable_idempotence=False,  # Tansu cannot do InitProducerId; processing is idempotent instead
            linger_ms=2,
            request_timeout_ms=int(self._settings.request_timeout_s * 1000),
            max_request_size=MAX_REQUEST_BYTES,
        )
        try:
            await producer.start()
        except (KafkaError, OSError) as exc:
            await producer.stop()
            raise TransportUnavailable(f"cannot connect the Kafka producer: {exc}") from exc
        self._producer = producer

    async def send(
        self, topic: str, value: bytes | None, key: bytes | None, headers: Iterable[tuple[str, bytes]] = ()
    ) -> None:
        """Send one record and wait for the broker's acknowledgement.

        Raises:
            RecordRefused: the record is too large or invalid; sending it again would fail the same way.
            TransportError: the broker could not take it now (retry).
        """
        if self._producer is None:
            raise TransportUnavailable("the Kafka producer is not connected")
        try:
            await self._producer.send_and_wait(topic, value=value, key=key, headers=list(headers))
        except REFUSALS as exc:
            raise RecordRefused(f"{topic} refuses the record: {exc}") from exc
        except KafkaError as exc:
            raise TransportUnavailable(f"cannot publish to {topic}: {exc}") from exc

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None


class KafkaSink:
    """Publishes suggestions to the suggestions topic, keyed by conversation id."""

    name = "kafka"

    def __init__(self, publisher: KafkaPublisher, topic: str) -> None:
        self._publisher = publisher
        self._topic = topic

    async def start(self) -> None:
        """The shared publisher is started by the daemon."""

    async def publish(self, suggestion: Suggestion) -> None:
        await self._publisher.send(self._topic, suggestion.to_json(), suggestion.conversation_id.encode())

    async def close(self) -> None:
        """The shared publisher is closed by the daemon."""


@dataclass(slots=True)
class _Ledger:
    """What is in flight on one partition, and so how far its offset may be committed."""

    # Insertion order = offset order; each with what stops its handling if the partition is taken back.
    pending: dict[int, Callable[[], None] | None] = field(default_factory=dict)
    next_offset: int | None = None
    committed: int | None = None
    idle: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, offset: int) -> None:
        self.pending[offset] = None
        self.next_offset = offset + 1
        self.idle.clear()

    def done(self, offset: int) -> None:
        self.pending.pop(offset, None)
        if not self.pending:
            self.idle.set()

    def watch(self, offset: int, stop: Callable[[], None]) -> None:
        if offset in self.pending:
            self.pending[offset] = stop

    def withdraw(self) -> int:
        """Stop the handling of every record still in flight (the partition has gone); how many there were."""
        stops = [stop for stop in self.pending.values() if stop is not None]
        self.pending.clear()
        self.idle.set()
        for stop in stops:
            stop()
        return len(stops)

    def committable(self) -> int | None:
        """The offset to commit: the oldest record still in flight, or one past the newest seen."""
        if self.pending:
            return next(iter(self.pending))
        return self.next_offset


@dataclass(slots=True)
class KafkaDelivery:
    """A Kafka record in flight."""

    record: Record
    _ledger: _Ledger
    _offset: int
    _dlq: KafkaDeadLetters

    def ack(self) -> None:
        self._ledger.done(self._offset)

    def on_withdrawn(self, stop: Callable[[], None]) -> None:
        self._ledger.watch(self._offset, stop)

    async def dead_letter(self, rejection: Rejected) -> None:
        await self._dlq.send(self.record, rejection)


class KafkaDeadLetters:
    """Writes rejected records to the DLQ topic with the reason and origin in headers: unchanged if they fit.

    A record near the size limit no longer fits once the headers are added. It then goes with its value cut to fit,
    and if even that is refused, as vigil's headers alone (the source headers say where to find the original).
    """

    def __init__(self, publisher: KafkaPublisher, topic: str) -> None:
        self._publisher = publisher
        self._topic = topic

    async def send(self, record: Record, rejection: Rejected) -> None:
        """Raises ``TransportError`` (retry), or ``RecordRefused`` if the broker refuses even the headers alone."""
        *larger, (key, value, headers) = self._forms(record, _encoded(dead_letter_headers(record, rejection)))
        for larger_key, larger_value, larger_headers in larger:
            try:
                await self._publisher.send(self._topic, larger_value, larger_key, larger_headers)
                return
            except RecordRefused as exc:
                log.info("the dead letter of %s is refused (%s); sending less of it", record.origin, exc)
        await self._publisher.send(self._topic, value, key, headers)

    def _forms(self, record: Record, ours: Headers) -> list[tuple[bytes | None, bytes | None, Headers]]:
        """The dead letter whole, then with its value cut to fit, then vigil's headers alone: smallest last."""
        # aiokafka will not send a record with neither key nor value; an empty value says the same.
        value = record.value if record.value is not None or record.key is not None else b""
        forms = [(record.key, value, [*record.headers, *ours])]
        cut = [*record.headers, *ours, *_encoded(truncation_headers(record, "value"))]
        if record.value and (room := _room(record.key, record.value, cut)) > 0:
            forms.append((record.key, record.value[:room], cut))
        forms.append((None, b"", [*ours, *_encoded(truncation_headers(record, "record"))]))
        return forms


def _addressee(key: bytes | None) -> str | None:
    """The conversation a record's key names. Bytes that are not UTF-8 become lone surrogates, which no valid
    ``conversation_id`` holds, so such a key never matches."""
    return None if key is None else key.decode("utf-8", "surrogateescape")


def _encoded(headers: list[tuple[str, str]]) -> Headers:
    return [(k, v.encode()) for k, v in headers]


def _room(key: bytes | None, value: bytes, headers: Headers) -> int:
    """How much of ``value`` fits in a record with ``key`` and ``headers``: 0 if none, or if it would all fit."""
    room = MAX_REQUEST_BYTES - _size(key, b"", headers)
    # The lengths are varints, so a longer value takes a few more bytes of framing: take those off too.
    while 0 < room < len(value) and (over := _size(key, value[:room], headers) - MAX_REQUEST_BYTES) > 0:
        room -= over
    return room if 0 < room < len(value) else 0


def _size(key: bytes | None, value: bytes | None, headers: Headers) -> int:
    """What the producer counts against ``MAX_REQUEST_BYTES`` for one record (an upper bound, as aiokafka checks)."""
    return int(DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, headers))


class KafkaSource:
    """Reads the input topic in a consumer group; commits offsets in order as records are acknowledged.

    When the group moves a partition to another member, the records still in flight on it are given
    ``handover_timeout_s`` to finish; those that have not are withdrawn (their handling is stopped: see
    ``Delivery.on_withdrawn``) before the partition goes, so the old owner stops before the new one starts. And
    with a ``TenureBook``, each partition the consumer is given is a new tenure of it, counted in the database
    before any of its records is handed out, and carried by each record: a consumer the group has moved on from
    without its knowing (stalled past its session, cut off from the broker) has its writes refused.
    """

    name = "kafka"

    def __init__(
        self,
        settings: KafkaSettings,
        publisher: KafkaPublisher,
        *,
        handover_timeout_s: float,
        metrics: Metrics | None = None,
        tenures: TenureBook | None = None,
    ) -> None:
        self._settings = settings
        self._metrics = metrics
        self._dlq = KafkaDeadLetters(publisher, settings.dlq_topic)
        self._handover_timeout_s = handover_timeout_s
        self._tenures = tenures
        self._held: dict[TopicPartition, Tenure | None] = {}  # the partitions held now, each with its tenure
        # Set while the partitions are settled: cleared when a rebalance begins (or before the first), set once
        # the partitions assigned are held (under their new tenures).
        self._settled = asyncio.Event()
        self._consumer: AIOKafkaConsumer | None = None
        self._ledgers: dict[TopicPartition, _Ledger] = {}
        self._stopping = asyncio.Event()
        self._committer: asyncio.Task[None] | None = None
        self.joined = False
        """Whether the consumer has joined its group and been given its partitions (none, when the group has more
        members than the topic has partitions) since it started. A later rebalance does not clear it: the replica
        still serves its panel and API while the group settles, and a readiness that dropped at each rebalance would
        take every replica out of its Service at once."""
        self.revocations = 0
        """How many times partitions were taken from this consumer (each rebalance it took part in with some)."""
        self.withdrawn = 0
        """How many records in flight were withdrawn because their partition was handed over before they finished."""

    async def start(self) -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self._settings.bootstrap_servers,
            group_id=self._settings.group_id,
            group_instance_id=self._settings.group_instance_id,
            client_id=self._settings.client_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=int(self._settings.session_timeout_s * 1000),
            heartbeat_interval_ms=int(self._settings.session_timeout_s * 1000 / 10),
            request_timeout_ms=int(self._settings.request_timeout_s * 1000) + 5000,
            max_poll_records=self._settings.fetch_max_records,
            fetch_max_wait_ms=int(self._settings.fetch_max_wait_s * 1000),
        )
        try:
            await consumer.start()
            consumer.subscribe([self._settings.input_topic], listener=_Rebalance(self))
        except (KafkaError, OSError) as exc:
            await consumer.stop()
            raise TransportUnavailable(f"cannot connect the Kafka consumer: {exc}") from exc
        self._consumer = consumer
        self._committer = asyncio.create_task(self._commit_forever(), name="vigil-kafka-commit")

    async def deliveries(self) -> AsyncIterator[KafkaDelivery]:
        consumer = self._consumer
        if consumer is None:
            raise TransportUnavailable("the Kafka consumer is not started")
        failing = False
        while not self._stopping.is_set():
            try:
                batch = await consumer.getmany(timeout_ms=200, max_records=self._settings.fetch_max_records)
            except KafkaError as exc:
                if not failing:
                    log.warning("fetching from Kafka failed; retrying", exc_info=exc)
                failing = True
                await asyncio.sleep(0.5)
                continue
            failing = False
            if batch and not self._settled.is_set():
                await self._settled.wait()  # a partition's records go out only once it is held (under its tenure)
            for tp, messages in batch.items():
                if tp not in self._held:
                    continue  # handed over since this batch was fetched: its new owner reads it
                ledger, tenure = self._ledgers.setdefault(tp, _Ledger()), self._held[tp]
                for message in messages:
                    if self._stopping.is_set():
                        return
                    if self._ledgers.get(tp) is not ledger:
                        break  # handed over while this batch was going out: its new owner reads the rest
                    ledger.add(message.offset)
                    origin = {"topic": tp.topic, "partition": str(tp.partition), "offset": str(message.offset)}
                    record = Record(
                        message.value,
                        message.key,
                        tuple(message.headers or ()),
                        origin,
                        conversation_id=_addressee(message.key),
                        tenure=tenure,
                    )
                    yield KafkaDelivery(record, ledger, message.offset, self._dlq)

    def stop_intake(self) -> None:
        self._stopping.set()
        self._settled.set()  # nothing waits on a rebalance any more

    async def check(self) -> None:
        if self._consumer is None:
            await probe_bootstrap(self._settings.bootstrap_servers or "", timeout_s=2.0)
            return
        try:
            async with asyncio.timeout(2.0):
                await self._consumer.topics()
        except (KafkaError, TimeoutError, OSError) as exc:
            raise TransportUnavailable(f"Kafka unreachable: {exc!r}") from exc

    async def check_membership(self) -> None:
        """Ready to serve only once the consumer has joined its group and holds its partitions: a rolling update
        that waits for readiness then moves on with the group settled, not in the middle of the join."""
        if not self.joined:
            raise TransportUnavailable(f"not a member of consumer group {self._settings.group_id!r} yet: joining it")

    async def commit(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Commit, for each partition, everything before its oldest record still in flight."""
        if self._consumer is None:
            return
        offsets = {}
        for tp in list(partitions if partitions is not None else self._ledgers):
            ledger = self._ledgers.get(tp)
            offset = ledger.committable() if ledger else None
            if ledger is not None and offset is not None and offset != ledger.committed:
                offsets[tp] = (ledger, offset)
        if not offsets:
            return
        try:
            await self._consumer.commit({tp: OffsetAndMetadata(o, "") for tp, (_, o) in offsets.items()})
        except KafkaError as exc:
            raise TransportUnavailable(f"offset commit failed: {exc!r}") from exc
        for ledger, offset in offsets.values():
            ledger.committed = offset

    def measure_lag(self) -> None:
        """``vigil_consumer_lag_records`` of each partition held: its high-water mark as of the last fetch, less the
        next offset to commit (what is in flight counts as not done)."""
        if self._consumer is None or self._metrics is None:
            return
        for tp in self._consumer.assignment():
            high, ledger = self._consumer.highwater(tp), self._ledgers.get(tp)
            done = ledger.committable() if ledger is not None else None
            if high is not None and done is not None:
                self._metrics.consumer_lag.labels(tp.topic, str(tp.partition)).set(max(0, high - done))

    def _forget_lag(self, partitions: Iterable[TopicPartition]) -> None:
        if self._metrics is None:
            return
        for tp in partitions:
            with contextlib.suppress(KeyError):
                self._metrics.consumer_lag.remove(tp.topic, str(tp.partition))

    async def _commit_forever(self) -> None:
        failing = False
        while True:
            await asyncio.sleep(self._settings.commit_interval_s)
            try:
                await self.commit()
            except TransportError as exc:
                if not failing:
                    log.warning("%s; will retry", exc)
                failing = True
            else:
                failing = False
            self.measure_lag()

    async def hand_over(self, revoked: Iterable[TopicPartition]) -> None:
        """Before partitions move to another member: let their in-flight records finish for up to the hand-over
        timeout, commit, then withdraw what is still in flight and forget the partitions."""
        if not self._stopping.is_set():
            self._settled.clear()
        given_up = list(revoked)
        self.revocations += bool(given_up)
        revoked = [tp for tp in given_up if tp in self._ledgers]
        waits = [self._ledgers[tp].idle.wait() for tp in revoked if self._ledgers[tp].pending]
        if waits:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._handover_timeout_s):
                    await asyncio.gather(*waits)
        try:
            await self.commit(revoked)
        except TransportError as exc:
            log.warning("%s during a rebalance; the new owner will re-read from the last commit", exc)
        withdrawn = sum(self._ledgers.pop(tp).withdraw() for tp in revoked)
        if withdrawn:
            self.withdrawn += withdrawn
            log.warning(
                "handed over %d partitions with %d records still in flight after %.1fs: their handling is stopped, "
                "the new owner reads them again",
                len(given_up),
                withdrawn,
                self._handover_timeout_s,
            )
        for tp in given_up:
            self._held.pop(tp, None)
        self._forget_lag(given_up)

    async def take_over(self, assigned: Iterable[TopicPartition]) -> None:
        """Hold newly assigned partitions: with a tenure book, each under a new tenure (taken before any of their
        records is handed out, retried while the database is unreachable)."""
        partitions = list(assigned)
        if self._tenures is None or not partitions:
            self._held.update(dict.fromkeys(partitions))
            self._settled.set()
            return
        scopes = {tp: f"kafka:{tp.topic}/{tp.partition}" for tp in partitions}
        failing = False
        while not self._stopping.is_set():
            try:
                taken = await self._tenures.take(scopes.values())
            except Exception as exc:  # the database down, or a bug: no record goes out untenured either way
                if not failing:
                    log.warning("cannot take the tenures of the assigned partitions; retrying: %s", exc)
                failing = True
                await asyncio.sleep(1.0)
                continue
            self._held.update({tp: taken[scope] for tp, scope in scopes.items()})
            break
        self._settled.set()

    async def close(self) -> None:
        self.joined = False
        if self._committer is not None:
            self._committer.cancel()
            await asyncio.gather(self._committer, return_exceptions=True)
        if self._consumer is not None:
            try:
                await self.commit()
            except TransportError as exc:
                log.warning("%s at shutdown; uncommitted records will be re-read", exc)
            await self._consumer.stop()
            self._consumer = None


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, source: KafkaSource) -> None:
        self._source = source

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._source.hand_over(revoked)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        log.info("assigned partitions: %s", sorted(f"{tp.topic}/{tp.partition}" for tp in assigned))
        await self._source.take_over(assigned)
        self._source.joined = True


async def probe_bootstrap(servers: str, *, timeout_s: float) -> None:
    """Raise ``TransportError`` unless one of the bootstrap servers accepts a TCP connection."""
    problems = []
    for server in filter(None, (s.strip() for s in servers.split(","))):
        host, _, port = server.rpartition(":")
        try:
            async with asyncio.timeout(timeout_s):
                _, writer = await asyncio.open_connection(host.strip("[]"), int(port))
        except (OSError, TimeoutError, ValueError) as exc:
            problems.append(f"{server}: {exc!r}")
            continue
        writer.close()
        await writer.wait_closed()
        return
    raise TransportUnavailable(f"Kafka unreachable: {'; '.join(problems) or 'no bootstrap servers'}")


async def ensure_topics(settings: KafkaSettings, names: Iterable[str], *, partitions: int) -> None:
    """Create the topics that do not exist yet (an existing one is left as it is)."""
    admin = AIOKafkaAdminClient(
        bootstrap_servers=settings.bootstrap_servers,
        client_id=settings.client_id,
        request_timeout_ms=int(settings.request_timeout_s * 1000),
    )
    try:
        await admin.start()
        existing = set(await admin.list_topics())
        wanted = [
            NewTopic(n, num_partitions=partitions, replication_factor=settings.replication_factor)
            for n in names
            if n not in existing
        ]
        if wanted:
            response = await admin.create_topics(wanted)
            for topic, code, *_ in getattr(response, "topic_errors", []) or getattr(response, "topics", []):
                if code not in (0, TOPIC_ALREADY_EXISTS):
                    raise TransportUnavailable(f"cannot create topic {topic}: error code {code}")
    except (KafkaError, OSError) as exc:
        raise TransportUnavailable(f"cannot create topics: {exc!r}") from exc
    finally:
        await admin.close()


class KafkaOutbox:
    """Puts events vigil produces (analysts' feedback from the panel) on the input topic, keyed by conversation."""

    name = "kafka"

    def __init__(self, publisher: KafkaPublisher, topic: str) -> None:
        self._publisher = publisher
        self._topic = topic

    async def submit(self, value: bytes, *, tenant: str, conversation_id: str) -> None:
        await self._publisher.send(self._topic, value, conversation_id.encode())


async def dead_letter_of(settings: KafkaSettings, value: bytes, *, timeout_s: float) -> dict[str, str] | None:
    """Why vigil dead-lettered the record ``value``, if it does within ``timeout_s``: the dead letter's headers
    (``vigil.dlq.reason``, ``vigil.dlq.detail``...); None if none came. For `vigil send`, which then tells its user
    rather than "sent". The topic is read from its start (seeking to its end is not to be trusted on every broker),
    and a dead letter is known by its value, which is the record's own unless it was too large to keep whole."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap_servers,
        client_id=settings.client_id,
        group_id=None,
        enable_auto_commit=False,
        request_timeout_ms=int(settings.request_timeout_s * 1000) + 5000,
    )
    deadline = asyncio.get_running_loop().time() + timeout_s
    try:
        await consumer.start()
        await consumer.topics()  # the cluster's metadata, with the topic's partitions
        partitions = consumer.partitions_for_topic(settings.dlq_topic) or set()
        consumer.assign([TopicPartition(settings.dlq_topic, p) for p in sorted(partitions)])
        await consumer.seek_to_beginning()
        while partitions and (left := deadline - asyncio.get_running_loop().time()) > 0:
            batch = await consumer.getmany(timeout_ms=int(min(left, 0.5) * 1000))
            for record in (r for records in batch.values() for r in records):
                if record.value == value:
                    return {k: v.decode("utf-8", "replace") for k, v in record.headers}
    except (KafkaError, OSError) as exc:
        raise TransportUnavailable(f"cannot read the dead-letter topic {settings.dlq_topic}: {exc}") from exc
    finally:
        await consumer.stop()
    return None
