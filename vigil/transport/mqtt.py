"""MQTT transport (aiomqtt over paho-mqtt, MQTT v5): events from the chat-platform sidecar, suggestions back to it.

At-least-once, like Kafka. vigil connects with a stable client id, ``clean_start`` off and a session expiry, so the
broker keeps its subscription and queues QoS 1 messages while vigil or the connection is away. PUBACKs are manual: a
message is acknowledged only once its record is fully handled and, as MQTT requires, in the order messages arrived,
so a record finished early waits for the ones before it (a ledger per connection, like Kafka's per partition). What
was received but not acknowledged when the connection dropped or vigil stopped is sent again by the broker (with DUP)
on the next connection, and idempotent processing absorbs the repeats. Message ids belong to one connection: its
ledger ends with it, and acknowledging a record from an earlier connection does nothing.

The subscription is QoS 1 even when ``qos`` is 2: paho answers a QoS 2 message with PUBREC on receipt, which hands it
over before vigil has stored it, so a crash would lose it. Suggestions, dead letters and outbox events are published
at ``qos`` and each waits for the broker's acknowledgement.

A tenant or conversation id is one topic level, UTF-8 percent-encoded where MQTT would read it as structure or the
broker would refuse it: ``%``, ``/``, ``+``, ``#``, ``$``, control characters, surrogates and non-characters (``a/b``
is ``a%2Fb``). Incoming levels are percent-decoded, so publishers encode ids the same way.

Receive Maximum bounds only what needs a PUBACK. QoS 0 messages come as fast as publishers send them, so vigil holds
at most ``max_queued_qos0`` of them waiting (in the client's queue and in the inbox, each), and drops and counts
(``vigil_mqtt_dropped_total``) any beyond that: QoS 0 promises nothing more. QoS 1 and 2 are never dropped.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import re
import ssl
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import unquote

import aiomqtt
from aiomqtt import MqttError
from aiomqtt.types import PahoSocket
from paho.mqtt.client import Client as PahoClient
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from vigil.core.errors import Rejected, SettingsError, TransportError, TransportUnavailable
from vigil.core.metrics import Metrics
from vigil.transport.base import Record, dead_letter_headers
from vigil.transport.settings import PLACEHOLDER, MqttSettings, topic_filter
from vigil.wire.events import Suggestion

log = logging.getLogger(__name__)

SUBSCRIPTION_QOS = 1
PUBLISH_TIMEOUT_S = 10.0


def _forbidden(char: str) -> bool:
    """Characters Mosquitto refuses in topics and properties (it drops the connection as a malformed packet)."""
    code = ord(char)
    return (
        code < 0x20
        or 0x7F <= code <= 0x9F
        or 0xD800 <= code <= 0xDFFF
        or 0xFDD0 <= code <= 0xFDEF
        or (code & 0xFFFE == 0xFFFE)
    )


def encode_level(value: str) -> str:
    """An id as one topic level: percent-encoded where MQTT would read it as structure or refuse it."""
    return "".join(
        "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass")) if c in "%/+#$" or _forbidden(c) else c
        for c in value
    )


def decode_level(level: str) -> str:
    """The id in a topic level (the inverse of ``encode_level``)."""
    return unquote(level, errors="surrogatepass")


def property_text(text: str, max_bytes: int = 65535) -> str:
    """``text`` as a user property the broker accepts: forbidden characters backslash-escaped, at most ``max_bytes``."""
    clean = "".join(c.encode("unicode_escape").decode() if _forbidden(c) else c for c in text)
    return clean.encode()[:max_bytes].decode("utf-8", "ignore")


_T = TypeVar("_T")


class _Held(asyncio.Queue[_T]):
    """Received messages waiting: any number at QoS 1 or 2 (the broker sends at most Receive Maximum of those), at
    most ``max_qos0`` at QoS 0; a QoS 0 message beyond that is dropped (``put_nowait`` calls ``on_drop``)."""

    def __init__(self, max_qos0: int, on_drop: Callable[[], None], qos_of: Callable[[_T], int]) -> None:
        super().__init__()
        self._max_qos0 = max_qos0
        self._on_drop = on_drop
        self._qos_of = qos_of
        self.qos0 = 0
        """QoS 0 messages held now."""

    def accepts(self, qos: int) -> bool:
        """Whether ``put_nowait`` would keep a message of this QoS."""
        return qos > 0 or self.qos0 < self._max_qos0

    def put_nowait(self, item: _T) -> None:
        if self.accepts(self._qos_of(item)):
            super().put_nowait(item)
        else:
            self._on_drop()

    def _put(self, item: _T) -> None:
        super()._put(item)
        self.qos0 += self._qos_of(item) == 0

    def _get(self) -> _T:
        item = super()._get()
        self.qos0 -= self._qos_of(item) == 0
        return item


def _message_qos(message: aiomqtt.Message) -> int:
    return message.qos


def _delivery_qos(delivery: MqttDelivery | None) -> int:
    return 1 if delivery is None else delivery.qos  # the stop marker is never dropped


def _properties(packet_type: int) -> Properties:
    return Properties(packet_type)  # type: ignore[no-untyped-call]


class _ClosingSSLSocket(ssl.SSLSocket):
    """Closes itself when the handshake fails (a certificate refused): paho leaves that socket open."""

    def do_handshake(self, block: bool = False) -> None:
        try:
            super().do_handshake(block)
        except BaseException:
            self.close()
            raise


def _tls_context(settings: MqttSettings) -> ssl.SSLContext:
    ca_file = settings.tls_ca_file
    try:
        context = ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise SettingsError("VIGIL_MQTT__TLS_CA_FILE", f"cannot read CA certificates from {ca_file}: {exc}") from exc
    context.sslsocket_class = _ClosingSSLSocket
    return context


class MqttClient(aiomqtt.Client):
    """aiomqtt's client, watching a socket for writing only while the connection still has it.

    paho asks for the socket to be watched for writing whenever it has bytes to send, and aiomqtt hands the
    ``add_writer`` to the loop with ``call_soon_threadsafe``. When the broker goes away in between, paho closes the
    socket before the loop gets to it: ``add_writer`` then fails on a closed descriptor (an EBADF traceback in the
    log), or, had the number been reused, would watch somebody else's socket. The registration is checked when it
    runs instead.
    """

    def _on_socket_register_write(self, client: PahoClient, userdata: Any, sock: PahoSocket) -> None:
        def write() -> None:
            try:
                client.loop_write()
            except Exception as exc:  # a broken connection: aiomqtt's own reconnect handles it
                if not self._disconnected.done():
                    self._disconnected.set_exception(exc)

        def register() -> None:
            current = client.socket()
            if current is None or current is not sock or current.fileno() < 0:
                return  # closed since it was asked for: the next connection registers its own socket
            self._loop.add_writer(current.fileno(), write)

        self._loop.call_soon_threadsafe(register)


class TopicPattern:
    """A topic template whose ``{tenant}`` and ``{conversation_id}`` stand for one encoded level each."""

    def __init__(self, template: str) -> None:
        self.template = template
        self.filter = topic_filter(template)
        seen: set[str] = set()
        parts = []
        for i, piece in enumerate(PLACEHOLDER.split(template)):  # literal, name, literal, ..., literal
            if i % 2 == 0:
                parts.append(re.escape(piece))
            else:
                parts.append(f"(?P={piece})" if piece in seen else f"(?P<{piece}>[^/]*)")
                seen.add(piece)
        self._regex = re.compile("".join(parts))

    def topic(self, *, tenant: str, conversation_id: str) -> str:
        """The topic of one conversation."""
        ids = {"tenant": encode_level(tenant), "conversation_id": encode_level(conversation_id)}
        return PLACEHOLDER.sub(lambda m: ids[m.group(1)], self.template)

    def conversation_id(self, topic: str) -> str | None:
        """The conversation id in ``topic``, or None if the topic does not follow the template."""
        return self.ids(topic).get("conversation_id")

    def ids(self, topic: str) -> dict[str, str]:
        """The tenant and conversation id ``topic`` names (those the template has), or nothing if it does not fit."""
        match = self._regex.fullmatch(topic)
        return {name: decode_level(level) for name, level in match.groupdict().items() if level} if match else {}


class _Ledger:
    """One connection's messages in arrival order; PUBACKs go out in that order, up to the oldest in flight."""

    def __init__(self, client: PahoClient) -> None:
        self._client = client
        self._pending: dict[int, tuple[int, int, bool]] = {}  # arrival number -> (mid, qos, done)
        self._arrivals = itertools.count()
        self.open = True

    def add(self, mid: int, qos: int) -> int:
        number = next(self._arrivals)
        self._pending[number] = (mid, qos, False)
        return number

    def done(self, number: int) -> None:
        if not self.open or number not in self._pending:
            return
        mid, qos, _ = self._pending[number]
        self._pending[number] = (mid, qos, True)
        while self._pending:
            oldest = next(iter(self._pending))
            mid, qos, finished = self._pending[oldest]
            if not finished:
                return
            del self._pending[oldest]
            if qos > 0:
                self._client.ack(mid, qos)


@dataclass(slots=True)
class _Session:
    """One live connection: its client, its ledger, and an event set when it ends."""

    client: aiomqtt.Client
    ledger: _Ledger
    lost: asyncio.Event = field(default_factory=asyncio.Event)

    async def publish(self, topic: str, payload: bytes, qos: int, properties: Properties | None) -> None:
        """Publish and wait for the broker's acknowledgement, or fail as soon as the connection ends."""
        sending = asyncio.ensure_future(
            self.client.publish(topic, payload, qos=qos, properties=properties, timeout=PUBLISH_TIMEOUT_S)
        )
        lost = asyncio.ensure_future(self.lost.wait())
        try:
            done, _ = await asyncio.wait((sending, lost), return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
            if not sending.done():
                sending.cancel()
        if sending not in done:
            raise MqttError("the connection was lost before the broker acknowledged")
        sending.result()


@dataclass(slots=True)
class MqttDelivery:
    """An MQTT message in flight; ``ack`` releases its PUBACK once every earlier message is acknowledged."""

    record: Record
    qos: int
    _ledger: _Ledger
    _number: int
    _connection: MqttConnection

    @property
    def stale(self) -> bool:
        """Its connection has ended; the broker will send the message again."""
        return not self._ledger.open

    def ack(self) -> None:
        self._ledger.done(self._number)

    async def dead_letter(self, rejection: Rejected) -> None:
        await self._connection.dead_letter(self.record, rejection)

    def on_withdrawn(self, stop: Callable[[], None]) -> None:
        """MQTT does not give a session's messages to another client while it is connected: never taken back."""


class MqttConnection:
    """One MQTT client kept connected, shared by the source, the sink and the outbox.

    Args:
        settings: where the broker is, the topics and the session.
        metrics: where dropped QoS 0 messages are counted.
        receive_maximum: messages the broker may have in flight to vigil (MQTT v5 Receive Maximum; Mosquitto
            honours it instead of its ``max_inflight_messages``); about ``ingest.max_in_flight``.

    Raises:
        SettingsError: no host, or the CA file cannot be read.
    """

    def __init__(self, settings: MqttSettings, *, metrics: Metrics, receive_maximum: int = 512) -> None:
        if not settings.host:
            raise SettingsError("VIGIL_MQTT__HOST", "required to use MQTT")
        self.settings = settings
        self.events = TopicPattern(settings.events_topic)
        self.suggestions = TopicPattern(settings.suggestions_topic)
        self._metrics = metrics
        self._dropping = False
        self.inbox = _Held(settings.max_queued_qos0, lambda: self._dropped("inbox_full"), _delivery_qos)
        """Received messages waiting for the source; None when intake stops."""
        self._receive_maximum = receive_maximum
        self._tls = _tls_context(settings) if settings.tls else None  # once, not on every reconnect
        self._where = f"{settings.host}:{settings.port}"
        self._session: _Session | None = None
        self._task: asyncio.Task[None] | None = None
        self._down_since: float | None = None

    @property
    def connected(self) -> bool:
        """Whether the broker is connected now (for health checks)."""
        return self._session is not None

    async def start(self) -> None:
        """Connect and subscribe, then stay connected in the background; does nothing if already started.

        Raises:
            TransportError: the first connection failed (the caller retries).
        """
        if self._task is not None:
            return
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(self._run(ready), name="vigil-mqtt")
        try:
            await ready
        except BaseException as exc:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            if isinstance(exc, MqttError | TransportError | OSError):
                raise TransportUnavailable(f"cannot connect to the MQTT broker at {self._where}: {exc}") from exc
            raise
        self._task = task

    async def _run(self, ready: asyncio.Future[None]) -> None:
        delay = self.settings.reconnect_initial_s
        while True:
            try:
                async with self._new_client() as client:
                    session = await self._open(client)
                    if not ready.done():
                        ready.set_result(None)
                    delay = self.settings.reconnect_initial_s
                    await self._pump(session)
            except Exception as exc:
                if not ready.done():
                    ready.set_exception(exc)
                    return
                self._lost(exc)
            finally:
                self._end()
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))
            delay = min(delay * 2, self.settings.reconnect_max_s)

    def _dropped(self, reason: str) -> None:
        self._metrics.mqtt_dropped.labels(reason).inc()
        if not self._dropping:  # once a flood, not once a message
            self._dropping = True
            log.warning(
                "dropping QoS 0 messages: %d already wait (VIGIL_MQTT__MAX_QUEUED_QOS0); see vigil_mqtt_dropped_total",
                self.settings.max_queued_qos0,
            )

    def _client_queue(self) -> type[asyncio.Queue[aiomqtt.Message]]:
        """The client's incoming queue, bounded like the inbox (aiomqtt's own bound would drop QoS 1 as well)."""
        max_qos0, on_drop = self.settings.max_queued_qos0, lambda: self._dropped("client_queue_full")

        class ClientQueue(_Held[aiomqtt.Message]):
            def __init__(self, maxsize: int = 0) -> None:  # aiomqtt passes its own bound, 0: none
                super().__init__(max_qos0, on_drop, _message_qos)

        return ClientQueue

    def _new_client(self) -> aiomqtt.Client:
        settings = self.settings
        properties = _properties(PacketTypes.CONNECT)
        properties.SessionExpiryInterval = settings.session_expiry_s
        properties.ReceiveMaximum = self._receive_maximum
        client = MqttClient(
            settings.host or "",
            settings.port,
            username=settings.username,
            password=settings.password.get_secret_value() if settings.password else None,
            identifier=settings.client_id,
            protocol=aiomqtt.ProtocolVersion.V5,
            clean_start=False,
            keepalive=settings.keepalive_s,
            properties=properties,
            tls_context=self._tls,
            queue_type=self._client_queue(),
        )
        # aiomqtt 2.5 has no manual acknowledgements; its paho client has (PUBACK only on ``ack(mid, qos)``).
        client._client.manual_ack_set(True)
        return client

    async def _open(self, client: aiomqtt.Client) -> _Session:
        options = SubscribeOptions(qos=SUBSCRIPTION_QOS, retainHandling=SubscribeOptions.RETAIN_SEND_IF_NEW_SUB)
        codes = await client.subscribe(self.events.filter, options=options)
        refused = [str(c) for c in codes if not isinstance(c, int) and c.is_failure]
        if refused:
            raise TransportUnavailable(f"the broker refused the subscription to {self.events.filter}: {refused[0]}")
        if self._down_since is not None:
            log.info(
                "reconnected to the MQTT broker at %s after %.1fs", self._where, time.monotonic() - self._down_since
            )
            self._down_since = None
        self._session = _Session(client, _Ledger(client._client))
        return self._session

    async def _pump(self, session: _Session) -> None:
        async for message in session.client.messages:
            if not self.inbox.accepts(message.qos):
                self._dropped("inbox_full")  # before the ledger, which would wait for it forever
                continue
            if message.qos == 0:
                self._dropping = False  # there is room again: the next flood is logged too
            number = session.ledger.add(message.mid, message.qos)
            self.inbox.put_nowait(MqttDelivery(self._record(message), message.qos, session.ledger, number, self))

    def _record(self, message: aiomqtt.Message) -> Record:
        topic = message.topic.value
        ids = self.events.ids(topic)
        conversation_id = ids.get("conversation_id")
        user_properties = getattr(message.properties, "UserProperty", None) or []
        return Record(
            value=message.payload,
            key=conversation_id.encode("utf-8", "surrogatepass") if conversation_id is not None else None,
            headers=tuple((k, v.encode("utf-8", "surrogatepass")) for k, v in user_properties),
            origin={"topic": topic},
            tenant=ids.get("tenant"),
            conversation_id=conversation_id,
        )

    def _lost(self, exc: Exception) -> None:
        if self._down_since is None:
            self._down_since = time.monotonic()
            log.warning("lost the MQTT broker at %s; reconnecting", self._where, exc_info=exc)
        else:
            log.debug("reconnecting to the MQTT broker at %s failed: %s", self._where, exc)

    def _end(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.ledger.open = False
            session.lost.set()

    async def publish(self, topic: str, payload: bytes, user_properties: Sequence[tuple[str, str]] = ()) -> None:
        """Publish at the configured QoS and wait for the broker's acknowledgement.

        Raises:
            TransportError: not connected, the connection dropped meanwhile, or the broker refused or did not answer.
        """
        session = self._session
        if session is None:
            raise TransportUnavailable(f"not connected to the MQTT broker at {self._where}")
        properties = None
        if user_properties:
            properties = _properties(PacketTypes.PUBLISH)
            properties.UserProperty = [(property_text(k), property_text(v)) for k, v in user_properties]
        try:
            await session.publish(topic, payload, self.settings.qos, properties)
        except (MqttError, ValueError) as exc:
            raise TransportUnavailable(f"cannot publish to {topic}: {exc}") from exc

    async def dead_letter(self, record: Record, rejection: Rejected) -> None:
        """Publish a rejected record's payload, unchanged, to the DLQ topic with the reason in user properties."""
        properties = [
            *((k, v.decode("utf-8", "replace")) for k, v in record.headers),
            *dead_letter_headers(record, rejection),
        ]
        await self.publish(self.settings.dlq_topic, record.value or b"", properties)

    async def close(self) -> None:
        """Disconnect (the broker keeps the session, and re-sends what was not acknowledged)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


class MqttSource:
    """Conversation events from the events topics of every tenant and conversation."""

    name = "mqtt"

    def __init__(self, connection: MqttConnection) -> None:
        self._connection = connection
        self._stopping = False

    async def start(self) -> None:
        await self._connection.start()

    async def deliveries(self) -> AsyncIterator[MqttDelivery]:
        """Until ``stop_intake``: what is still queued then stays un-acknowledged, and the broker sends it again."""
        while (delivery := await self._connection.inbox.get()) is not None and not self._stopping:
            if not delivery.stale:  # from a connection that ended: the broker sends it again on the new one
                yield delivery

    def stop_intake(self) -> None:
        self._stopping = True
        self._connection.inbox.put_nowait(None)  # wakes a waiting ``deliveries``

    async def check(self) -> None:
        if not self._connection.connected:
            raise TransportUnavailable(f"MQTT broker unreachable at {self._connection.settings.host}")

    async def close(self) -> None:
        """Nothing to commit: PUBACKs go out as records finish. The daemon closes the shared connection."""


class MqttSink:
    """Publishes each suggestion to its conversation's suggestions topic."""

    name = "mqtt"

    def __init__(self, connection: MqttConnection) -> None:
        self._connection = connection

    async def start(self) -> None:
        await self._connection.start()

    async def publish(self, suggestion: Suggestion) -> None:
        topic = self._connection.suggestions.topic(tenant=suggestion.tenant, conversation_id=suggestion.conversation_id)
        await self._connection.publish(topic, suggestion.to_json())

    async def close(self) -> None:
        """The daemon closes the shared connection."""


class MqttOutbox:
    """Puts events vigil produces (analysts' feedback) on their conversation's events topic."""

    name = "mqtt"

    def __init__(self, connection: MqttConnection) -> None:
        self._connection = connection

    async def submit(self, value: bytes, *, tenant: str, conversation_id: str) -> None:
        topic = self._connection.events.topic(tenant=tenant, conversation_id=conversation_id)
        await self._connection.publish(topic, value)
