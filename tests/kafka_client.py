"""An independent Kafka client for tests (librdkafka through confluent-kafka), to produce and read topics."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


@dataclass(frozen=True)
class Read:
    key: bytes | None
    value: bytes | None
    headers: dict[str, bytes]
    partition: int
    offset: int


Headers = list[tuple[str, bytes]]


def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, Headers]],
) -> None:
    """Produce (key, value) or (key, value, headers) records in order and wait until all are acknowledged."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": False,
            "linger.ms": 5,
            # Above librdkafka's 1 MB default, so tests can send records over vigil's 1 MiB input limit.
            "message.max.bytes": 8 * 1024 * 1024,
        }
    )
    errors: list[str] = []

    def delivered(err, _msg) -> None:  # type: ignore[no-untyped-def]
        if err is not None:
            errors.append(str(err))

    for key, value, *headers in records:
        while True:
            try:
                producer.produce(
                    topic, value=value, key=key, headers=headers[0] if headers else None, on_delivery=delivered
                )
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0, f"{remaining} records not delivered"
    assert not errors, errors


def read_topic(bootstrap: str, topic: str, *, expect: int, timeout_s: float = 30.0, partitions: int = 3) -> list[Read]:
    """Read every partition of ``topic`` from the beginning until ``expect`` records came (or time runs out)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "test-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[Read] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < expect and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().retriable() or "UNKNOWN_TOPIC" in str(msg.error()):
                    continue
                raise KafkaException(msg.error())
            got.append(Read(msg.key(), msg.value(), dict(msg.headers() or []), msg.partition(), msg.offset()))
    finally:
        consumer.close()
    return got


class AckedProducer(Producer):
    """A producer (``acks=all``) that keeps, for each partition it wrote to, one past the last offset the broker
    acknowledged: where a consumer that has read all it was sent stands. Tansu's ListOffsets says one past the *first*
    record of a partition's last batch (../shared/STACK.md), so a check that compares committed offsets with the
    watermarks alone passes while the records of that batch after its first are still unread."""

    def __init__(self, bootstrap: str, **config: Any) -> None:
        super().__init__({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **config})
        self._ends: dict[tuple[str, int], int] = {}

    def produce(self, topic: str, *args: Any, on_delivery: Any = None, **kwargs: Any) -> None:
        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                at = (msg.topic(), msg.partition())
                self._ends[at] = max(self._ends.get(at, 0), msg.offset() + 1)
            if on_delivery is not None:
                on_delivery(err, msg)

        super().produce(topic, *args, on_delivery=delivered, **kwargs)

    def ends(self, topic: str) -> dict[int, int]:
        """One past the last offset acknowledged on each partition of ``topic`` this producer wrote to."""
        # A copy first: delivery reports update the ends in whichever thread polls the producer.
        return {partition: end for (name, partition), end in self._ends.copy().items() if name == topic}


def committed(bootstrap: str, group: str, topic: str, *, partitions: int = 3) -> dict[int, int]:
    """The offsets ``group`` has committed on each partition of ``topic`` (negative where it has none)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        wanted = [TopicPartition(topic, p) for p in range(partitions)]
        return {tp.partition: tp.offset for tp in consumer.committed(wanted, timeout=10)}
    finally:
        consumer.close()
