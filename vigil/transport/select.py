"""The transports the settings ask for, built and connected together: Kafka, MQTT, or both."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial

from vigil.core.metrics import Metrics
from vigil.core.retry import Backoff
from vigil.transport.base import Outbox, Sink, Source, TenureBook
from vigil.transport.kafka import KafkaOutbox, KafkaPublisher, KafkaSink, KafkaSource, ensure_topics
from vigil.transport.mqtt import MqttConnection, MqttOutbox, MqttSink, MqttSource
from vigil.transport.settings import KafkaSettings, MqttSettings

log = logging.getLogger(__name__)

Step = Callable[[], Awaitable[None]]


@dataclass
class Transports:
    """Sources, sinks and outboxes, with the steps that connect and close them, in order."""

    sources: list[Source] = field(default_factory=list)
    sinks: list[Sink] = field(default_factory=list)
    outboxes: list[Outbox] = field(default_factory=list)
    checks: dict[str, Step] = field(default_factory=dict)
    """Health checks by dependency name: ``broker`` (Kafka), ``mqtt``."""
    _connect: list[tuple[str, Step]] = field(default_factory=list)
    _close: list[Step] = field(default_factory=list)

    @classmethod
    def from_settings(
        cls,
        kafka: KafkaSettings,
        mqtt: MqttSettings,
        *,
        metrics: Metrics,
        handover_timeout_s: float,
        max_in_flight: int,
        tenures: TenureBook | None = None,
    ) -> Transports:
        """Kafka if ``VIGIL_KAFKA__BOOTSTRAP_SERVERS`` is set, MQTT if ``VIGIL_MQTT__HOST`` is; nothing contacted.

        Args:
            kafka: ``VIGIL_KAFKA__*``.
            mqtt: ``VIGIL_MQTT__*``.
            metrics: where the transports count.
            handover_timeout_s: how long Kafka waits for in-flight work when its partitions are taken away.
            max_in_flight: events being processed at once; MQTT's broker sends at most this many unacknowledged.
            tenures: where Kafka counts the tenures of the partitions it is given (fencing; none without).
        """
        built = cls()
        if kafka.bootstrap_servers:
            built._add_kafka(kafka, handover_timeout_s, metrics, tenures)
        if mqtt.host:
            built._add_mqtt(mqtt, metrics, max_in_flight)
        return built

    def _add_kafka(
        self, kafka: KafkaSettings, handover_timeout_s: float, metrics: Metrics, tenures: TenureBook | None
    ) -> None:
        publisher = KafkaPublisher(kafka)
        source = KafkaSource(kafka, publisher, handover_timeout_s=handover_timeout_s, metrics=metrics, tenures=tenures)
        self.sources.append(source)
        self.sinks.append(KafkaSink(publisher, kafka.suggestions_topic))
        self.outboxes.append(KafkaOutbox(publisher, kafka.input_topic))
        self.checks["broker"] = source.check
        self.checks["consumer group"] = source.check_membership
        if kafka.create_topics:
            topics = (kafka.input_topic, kafka.suggestions_topic, kafka.dlq_topic)
            self._connect.append(
                ("creating topics", partial(ensure_topics, kafka, topics, partitions=kafka.partitions))
            )
        self._connect += [
            ("connecting the Kafka producer", publisher.start),
            ("connecting the Kafka consumer", source.start),
        ]
        self._close += [source.close, publisher.close]

    def _add_mqtt(self, mqtt: MqttSettings, metrics: Metrics, max_in_flight: int) -> None:
        # The broker sends at most this many messages not yet acknowledged: the same bound as Kafka's intake.
        connection = MqttConnection(mqtt, metrics=metrics, receive_maximum=min(max_in_flight, 65535))
        source = MqttSource(connection)
        self.sources.append(source)
        self.sinks.append(MqttSink(connection))
        self.outboxes.append(MqttOutbox(connection))
        self.checks["mqtt"] = source.check
        self._connect.append(("connecting to MQTT and subscribing", connection.start))
        self._close += [source.close, connection.close]

    async def connect(self, backoff: Backoff) -> None:
        """Connect everything, each step retried with back-off until it succeeds."""
        for what, step in self._connect:
            await backoff.retry(what, step)

    def stop_intake(self) -> None:
        """Stop every source taking new records."""
        for source in self.sources:
            source.stop_intake()

    async def close(self) -> None:
        """Acknowledge what is done and disconnect, in order; a failing step does not stop the others."""
        for step in self._close:
            try:
                await step()
            except Exception:
                log.exception("error while closing a transport")
