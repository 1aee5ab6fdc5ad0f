"""The Kafka transport against a real broker (Tansu): ordered commits, dead letters, hand-over, health."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial

import pytest
from aiokafka import TopicPartition
from prometheus_client import CollectorRegistry

from tests.conftest import Topics, create_topics, frozen, make_settings, migrated_store
from tests.kafka_client import produce, read_topic
from vigil.core.clock import SystemClock
from vigil.core.errors import RecordRefused, Rejected, TransportError
from vigil.core.metrics import Metrics
from vigil.core.retry import Backoff
from vigil.dev.broker import EmbeddedBroker
from vigil.flow.tenure import SqlTenures
from vigil.transport.kafka import MAX_REQUEST_BYTES, KafkaDelivery, KafkaPublisher, KafkaSource, ensure_topics


def source_for(broker: EmbeddedBroker, topics: Topics, tmp_path) -> tuple[KafkaSource, KafkaPublisher]:
    settings = make_settings(tmp_path=tmp_path, bootstrap=broker.bootstrap, topics=topics)
    publisher = KafkaPublisher(settings.kafka)
    return KafkaSource(settings.kafka, publisher, handover_timeout_s=5.0), publisher


async def take(source: KafkaSource, count: int, timeout_s: float = 20.0) -> list[KafkaDelivery]:
    got: list[KafkaDelivery] = []

    async def collect() -> None:
        async for delivery in source.deliveries():
            got.append(delivery)
            if len(got) == count:
                return

    await asyncio.wait_for(collect(), timeout_s)
    return got


async def committed(source: KafkaSource, tp: TopicPartition) -> int | None:
    assert source._consumer is not None
    return await source._consumer.committed(tp)


async def test_offsets_are_committed_only_past_what_is_done(kafka: EmbeddedBroker, topics: Topics, tmp_path):
    await create_topics(kafka.bootstrap, topics, partitions=1)
    produce(kafka.bootstrap, topics.input, [(b"k", f"r{n}".encode()) for n in range(10)])
    source, publisher = source_for(kafka, topics, tmp_path)
    await publisher.start()
    await source.start()
    tp = TopicPartition(topics.input, 0)
    try:
        deliveries = await take(source, 10)
        assert [d.record.value for d in deliveries] == [f"r{n}".encode() for n in range(10)]
        for n in (0, 1, 2, 5, 6, 9):
            deliveries[n].ack()
        await source.commit()
        assert await committed(source, tp) == 3  # records 3 and 4 are still in flight
        deliveries[3].ack()
        deliveries[4].ack()
        await source.commit()
        assert await committed(source, tp) == 7
        for n in (7, 8):
            deliveries[n].ack()
        await source.commit()
        assert await committed(source, tp) == 10
    finally:
        await source.close()
        await publisher.close()


async def test_the_lag_is_what_the_partition_holds_beyond_what_is_done_and_is_dropped_when_it_moves_away(
    kafka: EmbeddedBroker, topics: Topics, tmp_path
):
    await create_topics(kafka.bootstrap, topics, partitions=1)
    produce(kafka.bootstrap, topics.input, [(b"k", f"r{n}".encode()) for n in range(10)])
    settings = make_settings(tmp_path=tmp_path, bootstrap=kafka.bootstrap, topics=topics)
    publisher, registry = KafkaPublisher(settings.kafka), CollectorRegistry()
    source = KafkaSource(settings.kafka, publisher, handover_timeout_s=5.0, metrics=Metrics(registry))
    await source.start()
    lag = {"topic": topics.input, "partition": "0"}
    try:
        deliveries = await take(source, 10)
        for n in (0, 1, 2, 5):
            deliveries[n].ack()
        source.measure_lag()
        assert registry.get_sample_value("vigil_consumer_lag_records", lag) == 7  # 3 and 4 in flight: from 3 on
        for delivery in deliveries:
            delivery.ack()
        source.measure_lag()
        assert registry.get_sample_value("vigil_consumer_lag_records", lag) == 0
        await source.hand_over({TopicPartition(topics.input, 0)})
        assert registry.get_sample_value("vigil_consumer_lag_records", lag) is None
    finally:
        await source.close()
        await publisher.close()


async def test_a_restarted_source_resumes_from_the_commit(kafka: EmbeddedBroker, topics: Topics, tmp_path):
    await create_topics(kafka.bootstrap, topics, partitions=1)
    produce(kafka.bootstrap, topics.input, [(b"k", f"r{n}".encode()) for n in range(6)])
    source, publisher = source_for(kafka, topics, tmp_path)
    await source.start()
    first = await take(source, 6)
    for delivery in first[:4]:
        delivery.ack()
    await source.close()  # commits 4: records 4 and 5 were never acknowledged
    again, _ = source_for(kafka, topics, tmp_path)
    await again.start()
    try:
        redelivered = await take(again, 2)
        assert [d.record.value for d in redelivered] == [b"r4", b"r5"]
    finally:
        await again.close()
        await publisher.close()


async def test_dead_letters_keep_the_record_and_say_why(kafka: EmbeddedBroker, topics: Topics, tmp_path):
    await create_topics(kafka.bootstrap, topics, partitions=1)
    produce(kafka.bootstrap, topics.input, [(b"conv-9", b"\xff not utf-8")])
    source, publisher = source_for(kafka, topics, tmp_path)
    await publisher.start()
    await source.start()
    try:
        (delivery,) = await take(source, 1)
        await delivery.dead_letter(Rejected("invalid_utf8", "byte 0: invalid start byte"))
    finally:
        await source.close()
        await publisher.close()
    (dead,) = read_topic(kafka.bootstrap, topics.dlq, expect=1, partitions=1)
    assert (dead.key, dead.value) == (b"conv-9", b"\xff not utf-8")
    assert dead.headers["vigil.dlq.reason"] == b"invalid_utf8"
    assert dead.headers["vigil.dlq.detail"] == b"byte 0: invalid start byte"
    assert dead.headers["vigil.source.topic"] == topics.input.encode()
    assert (dead.headers["vigil.source.partition"], dead.headers["vigil.source.offset"]) == (b"0", b"0")


async def test_two_members_split_the_partitions_and_lose_nothing(kafka: EmbeddedBroker, topics: Topics, tmp_path):
    await create_topics(kafka.bootstrap, topics, partitions=3)
    produce(kafka.bootstrap, topics.input, [(f"c{n % 9}".encode(), f"a{n}".encode()) for n in range(60)])
    first, publisher = source_for(kafka, topics, tmp_path)
    await first.start()
    seen: list[bytes] = []

    async def drain_into(source: KafkaSource) -> None:
        async for delivery in source.deliveries():
            seen.append(delivery.record.value or b"")
            delivery.ack()

    one = asyncio.create_task(drain_into(first))
    await asyncio.sleep(0)
    deadline = asyncio.get_running_loop().time() + 20
    while len(seen) < 60 and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.1)
    second, _ = source_for(kafka, topics, tmp_path)
    await second.start()
    two = asyncio.create_task(drain_into(second))
    deadline = asyncio.get_running_loop().time() + 30
    while asyncio.get_running_loop().time() < deadline:
        mine = first._consumer.assignment() if first._consumer else set()
        theirs = second._consumer.assignment() if second._consumer else set()
        if mine and theirs:
            break
        await asyncio.sleep(0.1)
    produce(kafka.bootstrap, topics.input, [(f"c{n % 9}".encode(), f"b{n}".encode()) for n in range(60)])
    deadline = asyncio.get_running_loop().time() + 30
    while len(set(seen)) < 120 and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.1)
    try:
        assert len(set(seen)) == 120
        assert mine and theirs and not (mine & theirs), "the group did not split the partitions"
        assert mine | theirs == {TopicPartition(topics.input, p) for p in range(3)}
    finally:
        for source in (first, second):
            source.stop_intake()
        await asyncio.gather(one, two)
        await first.close()
        await second.close()
        await publisher.close()


async def test_check_fails_while_the_broker_is_frozen(own_kafka: EmbeddedBroker, topics: Topics, tmp_path):
    await create_topics(own_kafka.bootstrap, topics, partitions=1)
    source, publisher = source_for(own_kafka, topics, tmp_path)
    await source.start()
    try:
        await source.check()
        with frozen(own_kafka), pytest.raises(TransportError):
            await source.check()
        await source.check()
    finally:
        await source.close()
        await publisher.close()


async def test_unreachable_broker_is_a_transport_error(tmp_path, topics: Topics):
    from vigil.dev.broker import free_port

    settings = make_settings(tmp_path=tmp_path, bootstrap=f"127.0.0.1:{free_port()}", topics=topics)
    publisher = KafkaPublisher(settings.kafka)
    with pytest.raises(TransportError):
        await publisher.start()
    source = KafkaSource(settings.kafka, publisher, handover_timeout_s=1)
    with pytest.raises(TransportError):
        await source.start()
    with pytest.raises(TransportError):
        await source.check()


async def test_ensure_topics_is_idempotent(kafka: EmbeddedBroker, topics: Topics, tmp_path):
    settings = make_settings(tmp_path=tmp_path, bootstrap=kafka.bootstrap, topics=topics)
    await ensure_topics(settings.kafka, [topics.input], partitions=2)
    await ensure_topics(settings.kafka, [topics.input], partitions=2)
    produce(kafka.bootstrap, topics.input, [(b"k", b"v")])
    assert len(read_topic(kafka.bootstrap, topics.input, expect=1, partitions=2)) == 1


# --- Records the broker will never take ------------------------------------------------------------------------------


async def test_a_record_too_large_is_refused_for_good_and_not_retried(kafka: EmbeddedBroker, topics: Topics, tmp_path):
    await create_topics(kafka.bootstrap, topics, partitions=1)
    _, publisher = source_for(kafka, topics, tmp_path)
    metrics = Metrics(CollectorRegistry())
    backoff = Backoff(SystemClock(), metrics, initial_s=0.01)
    await publisher.start()
    try:
        too_large = partial(publisher.send, topics.dlq, b"x" * MAX_REQUEST_BYTES, b"k")
        with pytest.raises(RecordRefused):
            await asyncio.wait_for(backoff.retry("publishing", too_large), 10)
        await publisher.send(topics.dlq, b"x" * (MAX_REQUEST_BYTES - 1024), b"k")  # the producer still works
    finally:
        await publisher.close()
    assert not metrics.registry.get_sample_value("vigil_retries_total", {"dependency": "broker"})
    assert len(read_topic(kafka.bootstrap, topics.dlq, expect=1, partitions=1)) == 1


async def test_a_member_is_ready_once_it_holds_its_partitions_and_a_static_one_restarts_without_moving_the_others(
    kafka: EmbeddedBroker, topics: Topics, tmp_path
):
    await create_topics(kafka.bootstrap, topics, partitions=3)
    publisher = KafkaPublisher(make_settings(tmp_path=tmp_path, bootstrap=kafka.bootstrap, topics=topics).kafka)

    def replica(name: str) -> KafkaSource:
        kafka_settings = make_settings(tmp_path=tmp_path, bootstrap=kafka.bootstrap, topics=topics).kafka
        # A static member keeps its place while it is away for less than the session: longer than Tansu's join.
        static = kafka_settings.model_copy(update={"group_instance_id": name, "session_timeout_s": 20.0})
        return KafkaSource(static, publisher, handover_timeout_s=5.0)

    async def serve(source: KafkaSource) -> None:
        async for delivery in source.deliveries():
            delivery.ack()

    async def until(ready: Callable[[], bool], timeout_s: float = 30.0) -> None:
        async with asyncio.timeout(timeout_s):
            while not ready():
                await asyncio.sleep(0.05)

    def held(source: KafkaSource) -> set[TopicPartition]:
        return set(source._consumer.assignment()) if source._consumer else set()

    first, second = replica("vigil-0"), replica("vigil-1")
    await first.start()
    with pytest.raises(TransportError, match="not a member of consumer group"):
        await first.check_membership()  # connected, still joining: not ready
    serving = [asyncio.create_task(serve(first))]
    await until(lambda: first.joined)
    await first.check_membership()
    await second.start()
    serving.append(asyncio.create_task(serve(second)))
    everything = {TopicPartition(topics.input, p) for p in range(3)}

    def split() -> bool:  # the group has settled: each holds some, none twice, all held
        mine, theirs = held(first), held(second)
        return bool(
            first.joined and second.joined and mine and theirs and not mine & theirs and mine | theirs == everything
        )

    await until(split)
    await asyncio.sleep(1.0)  # and stays settled
    assert split()
    mine, theirs = held(first), held(second)

    # The second replica restarts under its name: the first keeps its partitions throughout, never rebalancing.
    lost: list[float] = []
    revocations = first.revocations
    watching = asyncio.create_task(_watch(lambda: held(first) == mine, lost))
    second.stop_intake()
    await serving.pop()
    await second.close()
    back = replica("vigil-1")
    await back.start()
    serving.append(asyncio.create_task(serve(back)))
    try:
        await until(lambda: back.joined)
        assert held(back) == theirs and held(first) == mine
        assert lost == [] and first.revocations == revocations, "the first replica paused while the second restarted"
        await first.check_membership()
    finally:
        watching.cancel()
        for source in (first, back):
            source.stop_intake()
        await asyncio.gather(*serving)
        await first.close()
        await back.close()
        await publisher.close()


async def _watch(holds: Callable[[], bool], lost: list[float]) -> None:
    """Note each moment ``holds`` is false, every 50 ms, until cancelled."""
    loop = asyncio.get_running_loop()
    while True:
        if not holds():
            lost.append(loop.time())
        await asyncio.sleep(0.05)


async def test_records_still_in_flight_when_their_partition_moves_are_withdrawn_and_reread_under_a_newer_tenure(
    kafka: EmbeddedBroker, topics: Topics, tmp_path, sqlite_url: str
):
    await create_topics(kafka.bootstrap, topics, partitions=2)
    produce(kafka.bootstrap, topics.input, [(f"c{n}".encode(), f"a{n}".encode()) for n in range(12)])
    settings = make_settings(tmp_path=tmp_path, bootstrap=kafka.bootstrap, topics=topics).kafka
    publisher = KafkaPublisher(settings)
    async with migrated_store(sqlite_url, tmp_path) as store:

        def member(name: str) -> KafkaSource:
            tenures = SqlTenures(store.engine, holder=name, clock=SystemClock(), timeout_s=5.0)
            return KafkaSource(settings, publisher, handover_timeout_s=0.5, tenures=tenures)

        first = member("vigil-0")
        await first.start()
        in_flight = await take(first, 12)  # none is ever acknowledged: all are in flight at the hand-over
        assert {d.record.tenure.epoch for d in in_flight if d.record.tenure} == {1}
        assert all(d.record.tenure for d in in_flight)
        withdrawn: list[bytes] = []
        for delivery in in_flight:
            delivery.on_withdrawn(partial(withdrawn.append, delivery.record.value or b""))
        second = member("vigil-1")
        await second.start()
        try:
            # The group gives the second member a partition: it reads that partition from the start again (nothing
            # was committed), under a tenure later than the one the first member read it under.
            again = await take(second, 1, timeout_s=40.0)
            moved = again[0].record.tenure
            assert moved is not None and moved.epoch >= 2
            assert sorted(withdrawn) == sorted(d.record.value for d in in_flight), "not all were withdrawn"
            assert first.withdrawn == 12
            assert moved.scope in {d.record.tenure.scope for d in in_flight if d.record.tenure}
        finally:
            for source in (first, second):
                source.stop_intake()
            await first.close()
            await second.close()
            await publisher.close()
