"""The MQTT transport against a real Mosquitto, with mosquitto_pub and mosquitto_sub as the chat platform."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import aiomqtt
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from tests.conftest import wait_for
from tests.mosquitto import Mosquitto, MosquittoSub, make_certificates, mosquitto_pub, mosquitto_pub_lines
from vigil.core.errors import Rejected, SettingsError, TransportError
from vigil.core.metrics import Metrics
from vigil.dev.broker import free_port
from vigil.transport.mqtt import (
    MqttClient,
    MqttConnection,
    MqttDelivery,
    MqttOutbox,
    MqttSink,
    MqttSource,
    decode_level,
    encode_level,
)
from vigil.transport.settings import MqttSettings
from vigil.wire.events import Suggestion, addressed, parse

Connect = Callable[[MqttSettings], Awaitable[MqttSource]]
LIMITS = {"max_event_bytes": 1024 * 1024, "max_text_bytes": 64 * 1024}


def settings_for(broker: Mosquitto, **overrides: object) -> MqttSettings:
    values: dict[str, object] = {
        "host": broker.host,
        "port": broker.port,
        "client_id": f"vigil-{uuid.uuid4().hex[:8]}",
        "keepalive_s": 5,
        "reconnect_initial_s": 0.05,
        "reconnect_max_s": 0.3,
    }
    return MqttSettings(**(values | overrides))  # type: ignore[arg-type]


@pytest.fixture
def metrics() -> Metrics:
    return Metrics(CollectorRegistry())


@pytest.fixture
async def connect(metrics: Metrics) -> AsyncIterator[Connect]:
    """Starts vigil's side (a connection and its source); closes every one at the end of the test."""
    opened: list[MqttConnection] = []

    async def start(settings: MqttSettings) -> MqttSource:
        connection = MqttConnection(settings, metrics=metrics)
        opened.append(connection)
        source = MqttSource(connection)
        await source.start()
        return source

    yield start
    for connection in opened:
        await connection.close()


async def take(source: MqttSource, count: int, timeout_s: float = 10.0) -> list[MqttDelivery]:
    async with asyncio.timeout(timeout_s), contextlib.aclosing(source.deliveries()) as deliveries:
        return [await anext(deliveries) for _ in range(count)]


def values(deliveries: list[MqttDelivery]) -> list[bytes | None]:
    return [d.record.value for d in deliveries]


def suggestion(tenant: str, conversation_id: str) -> Suggestion:
    return Suggestion(
        suggestion_id=f"s-{uuid.uuid4().hex[:6]}",
        conversation_id=conversation_id,
        tenant=tenant,
        created_at=datetime(2026, 11, 2, 9, 14, tzinfo=UTC),
        kind="answer",
        text="Restart the hub",
        confidence=0.8,
        latency_ms=12.5,
    )


async def test_events_from_mosquitto_pub_arrive_with_the_conversation_as_key(mosquitto: Mosquitto, connect: Connect):
    source = await connect(settings_for(mosquitto))
    await source.check()
    payload = b'{"schema_version":1,"type":"message","conversation_id":"conv-1"}'

    assert await mosquitto_pub(mosquitto, "vigil/acme/conv-1/suggestions", b"not an event") == 0
    options = ("-D", "publish", "user-property", "trace", "abc-1")
    assert await mosquitto_pub(mosquitto, "vigil/acme/conv-1/events", payload, *options) == 0

    [delivery] = await take(source, 1)
    assert delivery.record.value == payload  # and the suggestions topic, published first, was not subscribed
    assert delivery.record.key == b"conv-1"
    assert delivery.record.origin == {"topic": "vigil/acme/conv-1/events"}
    assert ("trace", b"abc-1") in delivery.record.headers


async def test_what_was_not_acknowledged_comes_again_after_a_restart_and_nothing_else(
    mosquitto: Mosquitto, connect: Connect
):
    settings = settings_for(mosquitto)
    first = await connect(settings)
    for text in (b"one", b"two"):
        assert await mosquitto_pub(mosquitto, "vigil/acme/c-1/events", text) == 0
    one, _two = await take(first, 2)
    one.ack()
    await first._connection.close()  # vigil stops with "two" still in flight

    second = await connect(settings)
    assert await mosquitto_pub(mosquitto, "vigil/acme/c-1/events", b"three") == 0
    # MQTT resends unacknowledged messages first, so "one" would have come before "three".
    assert values(await take(second, 2)) == [b"two", b"three"]


async def test_messages_sent_while_vigil_is_away_arrive_when_it_returns(mosquitto: Mosquitto, connect: Connect):
    settings = settings_for(mosquitto)
    await (await connect(settings))._connection.close()
    sent = [f"away-{i}".encode() for i in range(3)]
    for text in sent:
        assert await mosquitto_pub(mosquitto, "vigil/acme/c-2/events", text) == 0

    source = await connect(settings)
    assert values(await take(source, 3)) == sent


async def test_intake_stops_at_once_and_what_was_queued_comes_again(mosquitto: Mosquitto, connect: Connect):
    settings = settings_for(mosquitto)
    source = await connect(settings)
    sent = [f"queued-{i}".encode() for i in range(20)]
    for text in sent:
        assert await mosquitto_pub(mosquitto, "vigil/acme/c-3/events", text) == 0
    await wait_for(lambda: source._connection.inbox.qsize() == 20, 10)
    async with contextlib.aclosing(source.deliveries()) as deliveries:
        first = await anext(deliveries)
        first.ack()
        source.stop_intake()
        assert [d async for d in deliveries] == []  # not the 19 still queued
    await source._connection.close()

    again = await connect(settings)
    assert values(await take(again, 19)) == sent[1:]


async def test_acknowledgements_out_of_order_go_to_the_broker_in_arrival_order(mosquitto: Mosquitto, connect: Connect):
    settings = settings_for(mosquitto)
    first = await connect(settings)
    assert await mosquitto_pub(mosquitto, "vigil/acme/a/events", b"A") == 0
    assert await mosquitto_pub(mosquitto, "vigil/acme/b/events", b"B") == 0
    _a, b = await take(first, 2)
    b.ack()  # conversation b finished first; its PUBACK must wait for A's
    await first._connection.close()

    second = await connect(settings)
    a, b = await take(second, 2)
    assert values([a, b]) == [b"A", b"B"]  # both came again: B was not acknowledged ahead of A
    b.ack()
    a.ack()
    await second._connection.close()

    third = await connect(settings)
    assert await mosquitto_pub(mosquitto, "vigil/acme/a/events", b"C") == 0
    assert values(await take(third, 1)) == [b"C"]  # both were acknowledged once A was


async def test_a_broker_restart_mid_stream_loses_nothing_the_publisher_was_promised(
    mosquitto: Mosquitto, connect: Connect
):
    source = await connect(settings_for(mosquitto))
    connection = source._connection
    received: set[bytes | None] = set()
    promised: list[bytes] = []
    refused: list[bytes] = []

    async def consume() -> None:
        async for delivery in source.deliveries():
            received.add(delivery.record.value)
            delivery.ack()

    async def publish() -> None:
        # Until 40 are promised: how many the broker refuses while it is down depends on how long its restart takes.
        for i in range(200):
            if len(promised) >= 40:
                return
            payload = f"m-{i}".encode()
            code = await mosquitto_pub(mosquitto, f"vigil/acme/c-{i % 4}/events", payload, timeout_s=3)
            (promised if code == 0 else refused).append(payload)

    consumer = asyncio.create_task(consume())
    publisher = asyncio.create_task(publish())
    await wait_for(lambda: len(promised) >= 15)
    mosquitto.stop()
    await wait_for(lambda: not connection.connected)
    with pytest.raises(TransportError):
        await source.check()
    await wait_for(lambda: len(refused) >= 3)  # the publisher keeps trying while the broker is down
    mosquitto.start()
    await publisher
    await wait_for(lambda: set(promised) <= received)
    assert connection.connected
    await source.check()
    assert len(promised) >= 40
    source.stop_intake()
    await consumer


async def test_a_socket_that_closed_before_the_loop_could_watch_it_for_writing_is_left_alone(mosquitto: Mosquitto):
    # The race behind a broker restart: paho asks for its socket to be watched for writing (a publish queued), and
    # the connection drops before the loop runs the registration. paho's own close path closes the socket here.
    loop = asyncio.get_running_loop()
    errors: list[dict[str, object]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: errors.append(context))
    try:
        client = MqttClient(mosquitto.host, mosquitto.port, identifier=f"race-{uuid.uuid4().hex[:8]}")
        await client.__aenter__()
        paho = client._client
        paho.publish("vigil/race", b"queued")
        paho._sock_close()
        await asyncio.sleep(0.1)
        with contextlib.suppress(aiomqtt.MqttError):
            await client.__aexit__(None, None, None)
    finally:
        loop.set_exception_handler(previous)
    assert errors == []


async def test_an_acknowledgement_from_an_earlier_connection_does_nothing(mosquitto: Mosquitto, connect: Connect):
    settings = settings_for(mosquitto)
    source = await connect(settings)
    assert await mosquitto_pub(mosquitto, "vigil/acme/c-3/events", b"kept") == 0
    [old] = await take(source, 1)
    mosquitto.stop()
    mosquitto.start()
    [again] = await take(source, 1)  # the broker sends it again on the new connection, probably with the same id
    assert again.record.value == b"kept" and old.stale and not again.stale
    old.ack()  # must not acknowledge "again" (message ids are per connection)
    await source._connection.close()

    source = await connect(settings)
    assert values(await take(source, 1)) == [b"kept"]


async def test_a_dead_letter_keeps_the_payload_and_carries_the_reason(mosquitto: Mosquitto, connect: Connect):
    settings = settings_for(mosquitto, dlq_topic=f"dlq/{uuid.uuid4().hex[:8]}")
    reader = MosquittoSub(mosquitto, settings.dlq_topic, f"dlq-reader-{uuid.uuid4().hex[:8]}")
    await reader.subscribe()
    source = await connect(settings)
    options = ("-D", "publish", "user-property", "trace", "abc-2")
    assert await mosquitto_pub(mosquitto, "vigil/acme/c-4/events", b"{not json", *options) == 0
    [delivery] = await take(source, 1)

    await delivery.dead_letter(Rejected("invalid_json", "line 1\ncolumn 2: " + "é" * 2000))
    delivery.ack()

    [line] = await reader.read(1)
    topic, properties, payload = line.split("|", 2)
    assert (topic, payload) == (settings.dlq_topic, "{not json")
    assert "vigil.dlq.reason:invalid_json" in properties.split(" ")
    assert "vigil.source.topic:vigil/acme/c-4/events" in properties.split(" ")
    assert "trace:abc-2" in properties.split(" ")
    detail = re.search(r"vigil\.dlq\.detail:(.*) vigil\.source\.topic:", properties)
    assert detail is not None and detail.group(1).startswith("line 1\\ncolumn 2: éé")
    assert len(detail.group(1).encode()) <= 1024


async def test_suggestions_go_to_their_conversation_topic(mosquitto: Mosquitto, connect: Connect):
    source = await connect(settings_for(mosquitto))
    reader = MosquittoSub(mosquitto, "vigil/acme/conv-7/suggestions", f"reader-{uuid.uuid4().hex[:8]}")
    await reader.subscribe()
    sink = MqttSink(source._connection)
    await sink.start()
    sent = suggestion("acme", "conv-7")

    await sink.publish(sent)

    assert await reader.read(1, fmt="%t|%p") == [f"vigil/acme/conv-7/suggestions|{sent.to_json().decode()}"]


async def test_outbox_events_go_on_the_stream_vigil_reads(mosquitto: Mosquitto, connect: Connect):
    source = await connect(settings_for(mosquitto))
    reader = MosquittoSub(mosquitto, "vigil/+/+/events", f"reader-{uuid.uuid4().hex[:8]}")
    await reader.subscribe()
    feedback = b'{"schema_version":1,"type":"feedback","conversation_id":"conv-8"}'

    await MqttOutbox(source._connection).submit(feedback, tenant="acme", conversation_id="conv-8")

    assert await reader.read(1, fmt="%t|%p") == [f"vigil/acme/conv-8/events|{feedback.decode()}"]
    [delivery] = await take(source, 1)
    assert (delivery.record.value, delivery.record.key) == (feedback, b"conv-8")


async def test_ids_that_are_not_topic_levels_round_trip(mosquitto: Mosquitto, connect: Connect):
    tenant, conversation = "acme/eu", "c+1 #/%\x01$é"
    encoded = "vigil/acme%2Feu/c%2B1 %23%2F%25%01%24é"
    source = await connect(settings_for(mosquitto))
    reader = MosquittoSub(mosquitto, f"{encoded}/suggestions", f"reader-{uuid.uuid4().hex[:8]}")
    await reader.subscribe()

    await MqttOutbox(source._connection).submit(b"{}", tenant=tenant, conversation_id=conversation)
    [delivery] = await take(source, 1)
    assert delivery.record.origin["topic"] == f"{encoded}/events"
    assert delivery.record.key == conversation.encode()

    await MqttSink(source._connection).publish(suggestion(tenant, conversation))
    [line] = await reader.read(1, fmt="%t")
    assert line == f"{encoded}/suggestions"
    assert source._connection.connected  # the broker accepted every topic (it drops clients sending bad ones)


@given(st.text())
def test_encoded_levels_decode_to_the_id_and_hold_nothing_mqtt_refuses(value: str):
    level = encode_level(value)
    assert decode_level(level) == value
    assert not set(level) & set("/+#$\x00")
    assert all(0x20 <= ord(c) < 0x7F or ord(c) > 0x9F for c in level)
    level.encode("utf-8")  # no lone surrogates


async def test_publishing_while_the_broker_is_down_fails_as_a_transport_error(mosquitto: Mosquitto, connect: Connect):
    source = await connect(settings_for(mosquitto))
    assert await mosquitto_pub(mosquitto, "vigil/acme/c-5/events", b"x") == 0
    [delivery] = await take(source, 1)
    mosquitto.stop()
    await wait_for(lambda: not source._connection.connected)

    with pytest.raises(TransportError):
        await MqttSink(source._connection).publish(suggestion("acme", "c-5"))
    with pytest.raises(TransportError):
        await MqttOutbox(source._connection).submit(b"{}", tenant="acme", conversation_id="c-5")
    with pytest.raises(TransportError):
        await delivery.dead_letter(Rejected("invalid_json", "x"))


async def test_start_fails_as_a_transport_error_when_no_broker_listens():
    connection = MqttConnection(MqttSettings(host="127.0.0.1", port=free_port()), metrics=Metrics(CollectorRegistry()))
    with pytest.raises(TransportError, match="cannot connect"):
        await connection.start()
    assert not connection.connected


# Bounds on what vigil holds: a QoS 0 flood is dropped beyond the bound and counted; QoS 1 never is.


async def test_a_qos0_flood_while_vigil_is_busy_is_held_to_the_bound_and_qos1_all_arrives(
    mosquitto: Mosquitto, connect: Connect, metrics: Metrics
):
    bound = 50
    source = await connect(settings_for(mosquitto, max_queued_qos0=bound))
    connection = source._connection
    qos0 = [f"q0-{i}" for i in range(3000)]
    qos1 = [f"q1-{i}" for i in range(100)]

    def dropped() -> float:
        return sum(
            metrics.registry.get_sample_value("vigil_mqtt_dropped_total", {"reason": reason}) or 0
            for reason in ("client_queue_full", "inbox_full")
        )

    # Nothing takes from the inbox meanwhile: vigil's handling is blocked.
    codes = await asyncio.gather(
        mosquitto_pub_lines(mosquitto, "vigil/acme/flood/events", qos0, qos=0),
        mosquitto_pub_lines(mosquitto, "vigil/acme/steady/events", qos1, qos=1),
    )
    assert codes == [0, 0]
    await wait_for(lambda: connection.inbox.qsize() + dropped() == len(qos0) + len(qos1))

    assert connection.inbox.qsize() <= bound + len(qos1)
    assert dropped() == len(qos0) - bound, "every QoS 0 message beyond the bound is dropped, and no QoS 1"
    received = values(await take(source, connection.inbox.qsize()))
    assert sorted(v for v in received if v and v.startswith(b"q1-")) == sorted(q.encode() for q in qos1)
    assert len([v for v in received if v and v.startswith(b"q0-")]) == bound


# Ids taken from a topic are checked as strictly as the same fields in a payload.

TOPIC_TENANTS = [
    ("%00", "contains a NUL character"),
    ("%ED%A0%80", "contains a lone surrogate"),  # U+D800 as encode_level writes it, and decode_level reads it
    ("t" * 257, "at most 256 characters"),
    ("*", "means every tenant"),
]


@pytest.mark.parametrize(("level", "problem"), TOPIC_TENANTS, ids=["nul", "lone-surrogate", "over-long", "star"])
async def test_a_tenant_from_the_topic_that_no_payload_could_name_is_refused(
    mosquitto: Mosquitto, connect: Connect, level: str, problem: str
):
    source = await connect(settings_for(mosquitto))
    event = {"schema_version": 1, "type": "message", "message_id": "m-1", "conversation_id": "c-9"}
    event |= {"sent_at": "2026-11-02T09:14:05Z", "role": "customer", "text": "hello"}  # no tenant: the topic's
    payload = json.dumps(event).encode()
    assert await mosquitto_pub(mosquitto, f"vigil/{level}/c-9/events", payload) == 0
    [delivery] = await take(source, 1)
    record = delivery.record
    assert record.tenant == decode_level(level)

    with pytest.raises(Rejected) as refused:
        addressed(parse(record.value, **LIMITS), tenant=record.tenant, conversation_id=record.conversation_id)
    assert refused.value.reason == "invalid_field"
    assert refused.value.detail.startswith("the topic's tenant: ") and problem in refused.value.detail


# TLS and credentials: a listener that takes only TLS clients trusting its CA, with a user name and password.


@pytest.fixture
def secure_mosquitto(tmp_path: Path) -> Iterator[Mosquitto]:
    broker = Mosquitto(
        tmp_path / "secure", tls=make_certificates(tmp_path / "pki"), users={"vigil": "s3cret", "other": "x"}
    )
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def secure_settings(broker: Mosquitto, **overrides: object) -> MqttSettings:
    assert broker.tls is not None
    values = {"tls": True, "tls_ca_file": broker.tls.ca, "username": "vigil", "password": "s3cret"}
    return settings_for(broker, **(values | overrides))


async def test_over_tls_with_a_password_vigil_receives_events_and_publishes(
    secure_mosquitto: Mosquitto, connect: Connect
):
    source = await connect(secure_settings(secure_mosquitto))
    reader = MosquittoSub(secure_mosquitto, "vigil/acme/c-tls/suggestions", f"reader-{uuid.uuid4().hex[:8]}")
    await reader.subscribe()

    assert await mosquitto_pub(secure_mosquitto, "vigil/acme/c-tls/events", b"over TLS") == 0
    [delivery] = await take(source, 1)
    assert delivery.record.value == b"over TLS"
    delivery.ack()
    await MqttSink(source._connection).publish(suggestion("acme", "c-tls"))
    [line] = await reader.read(1, fmt="%t")
    assert line == "vigil/acme/c-tls/suggestions"


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"password": "wrong"}, "not authori[sz]ed|bad user name or password"),
        ({"username": None, "password": None}, "not authori[sz]ed|bad user name or password"),
    ],
    ids=["wrong-password", "anonymous"],
)
async def test_a_wrong_password_or_none_is_refused_with_a_clear_error(
    secure_mosquitto: Mosquitto, metrics: Metrics, overrides: dict[str, object], problem: str
):
    connection = MqttConnection(secure_settings(secure_mosquitto, **overrides), metrics=metrics)
    with pytest.raises(TransportError, match=f"(?i)cannot connect to the MQTT broker at 127.0.0.1:.*({problem})"):
        await connection.start()
    assert not connection.connected


async def test_a_broker_whose_certificate_the_configured_ca_did_not_sign_is_refused(
    secure_mosquitto: Mosquitto, metrics: Metrics, tmp_path: Path
):
    stranger = make_certificates(tmp_path / "another-pki")
    connection = MqttConnection(secure_settings(secure_mosquitto, tls_ca_file=stranger.ca), metrics=metrics)
    with pytest.raises(TransportError, match=r"cannot connect.*CERTIFICATE_VERIFY_FAILED"):
        await connection.start()
    assert not connection.connected
    gc.collect()  # a refused socket left open would warn now (ResourceWarning, an error in this suite), not later


def test_a_ca_file_needs_tls_and_must_be_readable(tmp_path: Path, metrics: Metrics):
    with pytest.raises(ValueError, match="VIGIL_MQTT__TLS is not"):
        MqttSettings(host="127.0.0.1", tls_ca_file=tmp_path / "ca.pem")
    settings = MqttSettings(host="127.0.0.1", tls=True, tls_ca_file=tmp_path / "missing.pem")
    with pytest.raises(SettingsError, match="VIGIL_MQTT__TLS_CA_FILE"):
        MqttConnection(settings, metrics=metrics)
