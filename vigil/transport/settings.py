"""The transports' sections of the settings: Kafka (``VIGIL_KAFKA__*``) and MQTT (``VIGIL_MQTT__*``)."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from vigil.core.settings import RuleBroken


class KafkaSettings(BaseModel):
    """Where the conversation stream comes from and where suggestions and dead letters go."""

    bootstrap_servers: str | None = Field(
        default=None, description="Comma-separated host:port list; required by `vigil run`."
    )
    group_id: str = Field(default="vigil", min_length=1)
    group_instance_id: str | None = Field(
        default=None,
        min_length=1,
        description="Static group membership (KIP-345): a name of this replica that survives its restarts (a "
        "StatefulSet pod's name). A replica that comes back under its name within the session timeout gets its "
        "partitions back without a rebalance, so the others never pause; one that does not come back gives its "
        "partitions up only when the session times out. Unset: dynamic membership (every join or leave rebalances).",
    )
    input_topic: str = Field(default="vigil.conversations", min_length=1)
    suggestions_topic: str = Field(default="vigil.suggestions", min_length=1)
    dlq_topic: str = Field(default="vigil.dlq", min_length=1)
    client_id: str = Field(default="vigil", min_length=1)
    create_topics: bool = Field(default=True, description="Create missing topics at start-up.")
    partitions: int = Field(default=6, ge=1, description="Partitions of topics vigil creates.")
    replication_factor: int = Field(default=1, ge=1, description="Replication of topics vigil creates.")
    commit_interval_s: float = Field(default=0.5, gt=0)
    fetch_max_records: int = Field(default=500, ge=1)
    fetch_max_wait_s: float = Field(
        default=0.02, gt=0, description="Longest a fetch may wait on the broker for records; bounds latency."
    )
    request_timeout_s: float = Field(default=10.0, gt=0)
    session_timeout_s: float = Field(
        default=10.0, ge=6.0, description="Kafka group session; a new member joins in about half of it."
    )


class MqttSettings(BaseModel):
    """The chat-platform sidecar: conversation events from MQTT, suggestions back to MQTT."""

    host: str | None = Field(default=None, description="MQTT broker host; set it to take events from MQTT.")
    port: int = Field(default=1883, ge=1, le=65535)
    username: str | None = None
    password: SecretStr | None = None
    tls: bool = Field(default=False, description="Connect with TLS (the system's CA certificates).")
    tls_ca_file: Path | None = Field(
        default=None, description="With tls: the CA certificates (PEM) to trust instead of the system's."
    )
    client_id: str = Field(
        default="vigil", min_length=1, description="Stable id: the broker keeps this session across restarts."
    )
    events_topic: str = Field(
        default="vigil/{tenant}/{conversation_id}/events",
        description="Where events arrive; {tenant} and {conversation_id} match one topic level each.",
    )
    suggestions_topic: str = Field(default="vigil/{tenant}/{conversation_id}/suggestions")
    dlq_topic: str = Field(default="vigil/dlq", min_length=1, description="Rejected payloads, unchanged.")
    qos: int = Field(default=1, ge=1, le=2, description="QoS of what vigil publishes (it subscribes at QoS 1).")
    session_expiry_s: int = Field(
        default=7 * 24 * 3600, ge=0, description="How long the broker keeps vigil's session while it is away."
    )
    keepalive_s: int = Field(default=30, ge=5)
    reconnect_initial_s: float = Field(default=0.5, gt=0)
    reconnect_max_s: float = Field(default=10.0, gt=0)
    max_queued_qos0: int = Field(
        default=1000,
        ge=1,
        description="QoS 0 messages held while vigil is busy (in the client's queue and in the inbox, each); beyond "
        "it new QoS 0 messages are dropped and counted. QoS 1 and 2 are never dropped: Receive Maximum bounds them.",
    )

    @field_validator("events_topic", "suggestions_topic")
    @classmethod
    def _names_the_conversation(cls, value: str) -> str:
        if "{conversation_id}" not in value:
            raise ValueError("must contain {conversation_id}")
        if "+" in value or "#" in value:
            raise ValueError("must not contain MQTT wildcards; use {tenant} and {conversation_id}")
        return value

    @field_validator("dlq_topic")
    @classmethod
    def _one_topic(cls, value: str) -> str:
        if "+" in value or "#" in value:
            raise ValueError("must not contain MQTT wildcards: it is one topic")
        return value

    @model_validator(mode="after")
    def _ca_file_with_tls(self) -> MqttSettings:
        if self.tls_ca_file is not None and not self.tls:
            raise RuleBroken("VIGIL_MQTT__TLS_CA_FILE", "is set but VIGIL_MQTT__TLS is not: set it to true to use TLS")
        return self

    @model_validator(mode="after")
    def _events_are_not_vigils_own(self) -> MqttSettings:
        """vigil must never read what it writes: a rejected payload would come back forever."""
        from paho.mqtt.client import topic_matches_sub  # noqa: PLC0415

        events = topic_filter(self.events_topic)
        for name, topic in (("DLQ_TOPIC", self.dlq_topic), ("SUGGESTIONS_TOPIC", self.suggestions_topic)):
            if topic_matches_sub(events, PLACEHOLDER.sub("x", topic)):
                raise RuleBroken("VIGIL_MQTT__EVENTS_TOPIC", f"would also receive VIGIL_MQTT__{name} ({topic!r})")
        return self


PLACEHOLDER = re.compile(r"\{(tenant|conversation_id)\}")


def topic_filter(template: str) -> str:
    """The MQTT subscription of a topic template: each level with a placeholder becomes ``+``."""
    return "/".join("+" if PLACEHOLDER.search(level) else level for level in template.split("/"))
