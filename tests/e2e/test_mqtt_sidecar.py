"""`vigil run` as an MQTT sidecar: a Mosquitto of the test's own, `mosquitto_pub`/`mosquitto_sub` as the chat platform.

Only MQTT is configured, so everything vigil stores arrived through the broker, and everything it says went back
through it: what is stored, in which order, once, across broker and vigil restarts; dead letters; suggestions and
the analyst's feedback.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import secrets
import signal
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.harness import Database, Records, VigilCli, VigilProcess, at, case, chat, eventually, message, ready
from tests.e2e.test_dead_letters import MAX_EVENT_BYTES, MAX_TEXT_BYTES, bad_records
from tests.mosquitto import Mosquitto, MosquittoSub, mosquitto_pub

pytestmark = pytest.mark.e2e

KNOWLEDGE = Path(__file__).parent.parent.parent / "knowledge"
EVENTS_TOPIC = "vigil/{tenant}/{conversation_id}/events"
PUBLISH_DEADLINE_S = 60.0
STARTUP_S = 60.0  # vigil imports for seconds, many on a busy machine


def sidecar(
    vigil: VigilCli, broker: Mosquitto, db_url: str, client_id: str | None = None, **settings: str
) -> VigilProcess:
    """`vigil run` reading only MQTT (no Kafka setting), reconnecting quickly, with a client id of its own."""
    return vigil.start(
        "run",
        VIGIL_MQTT__HOST=broker.host,
        VIGIL_MQTT__PORT=str(broker.port),
        VIGIL_MQTT__CLIENT_ID=client_id or f"vigil-{uuid.uuid4().hex[:8]}",
        VIGIL_MQTT__EVENTS_TOPIC=EVENTS_TOPIC,
        VIGIL_MQTT__RECONNECT_INITIAL_S="0.1",
        VIGIL_MQTT__RECONNECT_MAX_S="0.5",
        VIGIL_DATABASE__URL=db_url,
        **settings,
    )


def events_topic(conversation_id: str, tenant: str = "default") -> str:
    """Where the platform publishes a conversation's events (these tests' ids need no percent-encoding)."""
    return f"vigil/{tenant}/{conversation_id}/events"


def dumps(event: dict[str, Any]) -> bytes:
    return json.dumps(event, ensure_ascii=False).encode()


async def publish(
    broker: Mosquitto, conversation_id: str, payload: bytes, *options: str, tenant: str = "default"
) -> None:
    """One event with ``mosquitto_pub -V 5 -q 1``; the broker must acknowledge it."""
    topic = events_topic(conversation_id, tenant)
    if payload:
        assert await mosquitto_pub(broker, topic, payload, *options) == 0, f"not acknowledged: {payload[:60]!r}"
        return
    # `-s` refuses empty input; an empty payload is `-n`.
    process = await asyncio.create_subprocess_exec(
        "mosquitto_pub", *("-h", broker.host, "-p", str(broker.port), "-V", "5", "-q", "1", "-t", topic, "-n")
    )
    assert await asyncio.wait_for(process.wait(), 10) == 0


@dataclass
class ChatPlatform:
    """The platform's publisher: each event by its own `mosquitto_pub` run, sent again until acknowledged."""

    broker: Mosquitto
    acknowledged: int = 0
    refused: int = 0

    async def send(self, records: Records) -> None:
        """Publish ``records`` in order; an event is not followed by the next before the broker has taken it."""
        deadline = asyncio.get_running_loop().time() + PUBLISH_DEADLINE_S
        for key, value in records:
            assert key is not None and value is not None
            while await mosquitto_pub(self.broker, events_topic(key.decode()), value, timeout_s=3) != 0:
                self.refused += 1
                assert asyncio.get_running_loop().time() < deadline, "the broker refused events for too long"
                await asyncio.sleep(0.05)  # a publisher's retry back-off, not a synchronisation
            self.acknowledged += 1


def readiness(daemon: VigilProcess) -> tuple[int, dict[str, Any]] | None:
    try:
        response = daemon.get("/readyz")
    except httpx.TransportError:
        return None
    return response.status_code, response.json()


async def unready_for_mqtt(daemon: VigilProcess) -> None:
    """Wait until /readyz is 503 and names the MQTT broker, and only it."""

    def mqtt_down() -> bool:
        seen = readiness(daemon)
        return seen is not None and seen[0] == 503 and set(seen[1].get("problems", {})) == {"mqtt"}

    await eventually("/readyz 503 naming mqtt", mqtt_down, 10, daemon, show=lambda: readiness(daemon))


def stop(daemon: VigilProcess) -> None:
    """Stop vigil cleanly; the only tracebacks in its log may be the one logged when it lost the broker."""
    daemon.stop(clean=False)
    records = re.split(r"\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ )", daemon.log())
    unexpected = [
        r for r in records if "Traceback" in r and "WARNING vigil.transport.mqtt: lost the MQTT broker" not in r
    ]
    assert not unexpected, f"a traceback in vigil's log:\n{unexpected[0]}"


def conversation_events(conversation_id: str, messages: int) -> list[dict[str, Any]]:
    events = [case(conversation_id, f"{conversation_id}-open", "opened", when=at(0))]
    for n in range(messages):
        role = "customer" if n % 2 == 0 else "analyst"
        # Every fourth message from a device whose clock is behind: stored in stream order, not sent_at order.
        sent = n * 10 - (25 if n % 4 == 3 else 0)
        events.append(
            message(conversation_id, f"{conversation_id}-m{n:02d}", f"text {n}: ça va? 👋", role=role, sent_at=at(sent))
        )
    events.append(case(conversation_id, f"{conversation_id}-close", "closed", when=at(500)))
    return events


async def test_events_are_stored_in_order_once_and_readyz_names_mqtt_while_the_broker_is_down(
    vigil: VigilCli, mosquitto: Mosquitto, sqlite_url: str
) -> None:
    scripts = {f"mq-c{n}": conversation_events(f"mq-c{n}", 8) for n in range(4)}
    stream = [script[step] for step in range(10) for script in scripts.values()]  # interleaved, as on a busy stream
    daemon = sidecar(vigil, mosquitto, sqlite_url)
    await ready(daemon, STARTUP_S)
    assert readiness(daemon) == (200, {"status": "ready"})

    for event in stream:
        await publish(mosquitto, event["conversation_id"], dumps(event))
    db = Database(sqlite_url)
    await db.reach("message", 32, daemon)
    await db.reach("case_event", 8, daemon)
    for conversation_id, script in scripts.items():
        assert db.message_ids(conversation_id) == [e["message_id"] for e in script if e["type"] == "message"]
    assert db.query("SELECT id, status, message_count, tenant FROM conversation ORDER BY id") == [
        (conversation_id, "closed", 8, "default") for conversation_id in scripts
    ]
    view = daemon.conversation("mq-c1")
    assert view is not None and view["messages"][-4]["text"] == "text 3: ça va? 👋"  # newest first

    # The platform sends a message again (same message_id, even with other text): stored once, counted as a duplicate.
    resent = message("mq-c2", "mq-c2-m05", "text 5, edited", role="analyst", sent_at=at(50))
    await publish(mosquitto, "mq-c2", dumps(resent))
    await eventually(
        "the duplicate counted",
        lambda: daemon.metric("vigil_events_duplicate_total", type="message") == 1,
        10,
        daemon,
    )
    assert db.count("message") == 32
    assert db.scalar("SELECT text FROM message WHERE message_id = 'mq-c2-m05'") == "text 5: ça va? 👋"
    assert db.scalar("SELECT message_count FROM conversation WHERE id = 'mq-c2'") == 8
    assert daemon.metric("vigil_events_consumed_total", type="message") == 33

    mosquitto.stop()
    await unready_for_mqtt(daemon)
    assert daemon.status("/healthz") == 200  # alive, only not ready
    mosquitto.start()
    await ready(daemon)
    stop(daemon)


async def test_a_broker_restart_mid_stream_loses_and_duplicates_nothing(
    vigil: VigilCli, mosquitto: Mosquitto, sqlite_url: str
) -> None:
    records, expected = chat(conversations=5, messages=200, prefix="broker")
    daemon = sidecar(vigil, mosquitto, sqlite_url)
    await ready(daemon, STARTUP_S)
    db = Database(sqlite_url)
    platform = ChatPlatform(mosquitto)
    publishing = asyncio.create_task(platform.send(records))
    try:
        await eventually("70 events sent", lambda: platform.acknowledged >= 70, 30, daemon)
        mosquitto.stop()
        down_at = platform.acknowledged
        await unready_for_mqtt(daemon)
        await eventually("the publisher refused while the broker is down", lambda: platform.refused >= 3, 10, daemon)
        mosquitto.start()
        await asyncio.wait_for(asyncio.shield(publishing), PUBLISH_DEADLINE_S)
    finally:
        publishing.cancel()
    assert down_at < 200 and platform.acknowledged == 200

    await db.reach("message", 200, daemon, timeout_s=30)
    db.assert_stored_once(expected)
    await ready(daemon)  # the same process reconnected by itself
    assert "reconnected to the MQTT broker" in daemon.log()
    assert (
        daemon.metric("vigil_events_consumed_total", type="message")
        - daemon.metric("vigil_events_duplicate_total", type="message")
        == 200
    )
    stop(daemon)


async def test_a_killed_vigil_gets_what_was_sent_while_it_was_down_from_its_session(
    vigil: VigilCli, mosquitto: Mosquitto, sqlite_url: str
) -> None:
    records, expected = chat(conversations=6, messages=300, prefix="kill")
    client_id = f"vigil-{uuid.uuid4().hex[:8]}"
    first = sidecar(vigil, mosquitto, sqlite_url, client_id)
    await ready(first, STARTUP_S)
    db = Database(sqlite_url)
    platform = ChatPlatform(mosquitto)
    publishing = asyncio.create_task(platform.send(records))
    try:
        await db.reach("message", 60, first, at_least=True)
        first.send(signal.SIGKILL)
        first.wait(10)
        stored = db.count("message")
        killed_at = platform.acknowledged
        # The platform keeps publishing while vigil is away; the broker queues it in vigil's session.
        await eventually("events sent while vigil is down", lambda: platform.acknowledged >= killed_at + 30, 20)
        second = sidecar(vigil, mosquitto, sqlite_url, client_id)
        await asyncio.wait_for(asyncio.shield(publishing), PUBLISH_DEADLINE_S)
    finally:
        publishing.cancel()
    assert stored < 300, "the kill came after the whole stream"  # (and 30 or more were sent while vigil was down)

    await db.reach("message", 300, second, timeout_s=STARTUP_S)
    db.assert_stored_once(expected)
    # What the first process stored but had not acknowledged came again, and was recognised as a duplicate.
    consumed = second.metric("vigil_events_consumed_total", type="message")
    duplicates = second.metric("vigil_events_duplicate_total", type="message")
    assert consumed - duplicates == 300 - stored
    assert platform.refused == 0
    second.stop()


def dead_letter(line: str) -> tuple[str, dict[str, str], bytes]:
    """A ``mosquitto_sub -F '%t|%P|%x'`` line: the topic, vigil's user properties, and the payload."""
    topic, rest = line.split("|", 1)
    properties, payload = rest.rsplit("|", 1)
    found = re.search(
        r"(?:^| )vigil\.dlq\.reason:(\S+) vigil\.dlq\.detail:(.*) vigil\.source\.topic:(\S+)$", properties
    )
    assert found is not None, f"no DLQ properties in {properties!r}"
    reason, detail, source = found.groups()
    return topic, {"reason": reason, "detail": detail, "source": source, "all": properties}, bytes.fromhex(payload)


async def test_malformed_payloads_are_dead_lettered_unchanged_with_their_reason(
    vigil: VigilCli, mosquitto: Mosquitto, sqlite_url: str
) -> None:
    dlq = MosquittoSub(mosquitto, "vigil/dlq", f"dlq-reader-{uuid.uuid4().hex[:8]}")
    await dlq.subscribe()
    daemon = sidecar(
        vigil,
        mosquitto,
        sqlite_url,
        VIGIL_INGEST__MAX_TEXT_BYTES=str(MAX_TEXT_BYTES),
        VIGIL_INGEST__MAX_EVENT_BYTES=str(MAX_EVENT_BYTES),
    )
    await ready(daemon, STARTUP_S)
    good_ids: list[str] = []

    async def good(n: int, tenant: str | None = None) -> None:
        # On acme's topic: an event that leaves its tenant out takes the topic's.
        good_ids.append(f"dlq-good-{n:02d}")
        event = message("dlq-c1", f"dlq-good-{n:02d}", f"good {n}", sent_at=at(n))
        await publish(mosquitto, "dlq-c1", dumps(event | ({"tenant": tenant} if tenant else {})), tenant="acme")

    # The same cases as on Kafka, each followed at once by a good event of the same conversation.
    await good(0, tenant="acme")
    expected: dict[bytes, str] = {}
    for n, (value, reason) in enumerate(bad_records(), start=1):
        expected[value or b""] = reason
        options = ("-D", "publish", "user-property", "trace", f"t-{n}") if n == 1 else ()
        await publish(mosquitto, "dlq-c1", value or b"", *options, tenant="acme")
        await good(n)
    # Another tenant's events for acme's conversation, on that tenant's topic: the conversation is acme's.
    for value in (
        dumps(message("dlq-c1", "dlq-other-tenant", "hi", tenant="globex")),
        dumps(case("dlq-c1", "dlq-other-tenant-case", "escalated", tenant="globex")),
    ):
        expected[value] = "tenant_mismatch"
        await publish(mosquitto, "dlq-c1", value, tenant="globex")
    # Payloads that contradict the topic they came on.
    for value in (
        dumps(message("dlq-c1", "dlq-wrong-topic-tenant", "hi", tenant="globex")),
        dumps(message("dlq-c2", "dlq-wrong-topic-conversation", "hi")),
    ):
        expected[value] = "address_mismatch"
        await publish(mosquitto, "dlq-c1", value, tenant="acme")
    # Tenants on the topic that no payload could name: NUL, a lone surrogate (as percent-encoded), too long, `*`.
    bad_levels = ("%00", "%ED%A0%80", "t" * 257, "*")
    for n, level in enumerate(bad_levels):
        value = dumps(message(f"dlq-bad-tenant-{n}", f"dlq-bad-tenant-{n}", "hi"))
        expected[value] = "invalid_field"
        await publish(mosquitto, f"dlq-bad-tenant-{n}", value, tenant=level)
    await good(99, tenant="acme")
    # A new conversation whose events name no tenant belongs to the tenant of its topic.
    await publish(mosquitto, "dlq-c3", dumps(message("dlq-c3", "dlq-c3-m1", "hello")), tenant="acme")

    db = Database(sqlite_url)
    await db.reach("message", len(good_ids) + 1, daemon)
    assert db.message_ids("dlq-c1") == good_ids
    assert db.query("SELECT id, tenant FROM conversation ORDER BY id") == [("dlq-c1", "acme"), ("dlq-c3", "acme")]

    letters = [dead_letter(line) for line in await dlq.read(len(expected), fmt="%t|%P|%x", timeout_s=20)]
    assert len(letters) == len(expected)
    seen: dict[bytes, str] = {}
    for topic, properties, payload in letters:
        assert topic == "vigil/dlq"
        assert payload in expected, f"not a payload as it was published: {payload[:80]!r}"
        sources = {events_topic("dlq-c1", "acme"), events_topic("dlq-c1", "globex")}
        sources |= {events_topic(f"dlq-bad-tenant-{n}", level) for n, level in enumerate(bad_levels)}
        assert properties["source"] in sources
        assert properties["detail"], f"no detail for {properties['reason']}"
        seen[payload] = properties["reason"]
    assert seen == expected  # each payload once, unchanged, with its reason
    [first] = [p for _, p, payload in letters if payload == bad_records()[0][0]]
    assert first["all"].startswith("trace:t-1 ")  # the publisher's user properties are kept too

    for reason in set(expected.values()):
        count = sum(1 for r in expected.values() if r == reason)
        assert daemon.metric("vigil_events_dead_lettered_total", reason=reason) == count, reason
    assert daemon.status("/readyz") == 200
    daemon.stop()


@pytest.mark.timeout(300)
async def test_a_question_gets_a_suggestion_on_mqtt_and_the_feedback_comes_back_through_it(
    vigil: VigilCli, mosquitto: Mosquitto, sqlite_url: str
) -> None:
    token = secrets.token_urlsafe(32)
    user = {
        "name": "ana",
        "role": "analyst",
        "tenants": ["*"],
        "token_sha256": hashlib.sha256(token.encode()).hexdigest(),
    }
    suggestions = MosquittoSub(mosquitto, "vigil/+/+/suggestions", f"platform-{uuid.uuid4().hex[:8]}")
    await suggestions.subscribe()
    daemon = sidecar(
        vigil,
        mosquitto,
        sqlite_url,
        VIGIL_ANSWERS__ENABLED="true",
        VIGIL_KNOWLEDGE__PATHS=json.dumps([str(KNOWLEDGE / "articles"), str(KNOWLEDGE / "faqs")]),
        VIGIL_PANEL__AUTH="tokens",
        VIGIL_PANEL__USERS=json.dumps([user]),
    )
    await ready(daemon, timeout_s=150)

    # A conversation id with a slash: one topic level, percent-encoded both ways.
    conversation_id, encoded = "web/4711", "web%2F4711"
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    question = message(conversation_id, "web-4711-m1", "When do you take the money for my bill?", sent_at=now)
    assert await mosquitto_pub(mosquitto, f"vigil/default/{encoded}/events", dumps(question)) == 0

    [line] = await suggestions.read(1, fmt="%t|%p", timeout_s=30)
    topic, payload = line.split("|", 1)
    answer = json.loads(payload)
    assert topic == f"vigil/default/{encoded}/suggestions"
    assert (answer["type"], answer["kind"], answer["in_reply_to"]) == ("suggestion", "answer", "web-4711-m1")
    assert (answer["conversation_id"], answer["tenant"]) == (conversation_id, "default")
    assert answer["sources"][0]["id"] == "faq-bill-date"

    events = MosquittoSub(mosquitto, f"vigil/default/{encoded}/events", f"platform-{uuid.uuid4().hex[:8]}")
    await events.subscribe()
    url = f"{daemon.base_url}/api/suggestions/{answer['suggestion_id']}/feedback"
    response = httpx.post(url, json={"verdict": "accepted"}, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert response.status_code == 202, response.text
    feedback_id = response.json()["feedback_id"]
    assert httpx.post(url, json={"verdict": "accepted"}, timeout=10).status_code == 401  # no token, no feedback

    [line] = await events.read(1, fmt="%t|%p")
    topic, payload = line.split("|", 1)
    assert topic == f"vigil/default/{encoded}/events"
    feedback = json.loads(payload)
    assert (feedback["type"], feedback["feedback_id"], feedback["suggestion_id"]) == (
        "feedback",
        feedback_id,
        answer["suggestion_id"],
    )
    assert (feedback["verdict"], feedback["by"], feedback["conversation_id"]) == ("accepted", "ana", conversation_id)

    db = Database(sqlite_url)
    await eventually(
        "the feedback stored",
        lambda: (
            db.query("SELECT suggestion_id, verdict FROM feedback WHERE feedback_id = ?", feedback_id)
            == [(answer["suggestion_id"], "accepted")]
        ),
        20,
        daemon,
    )
    await eventually(
        "the feedback counted",
        lambda: daemon.metric("vigil_feedback_total", kind="answer", verdict="accepted") == 1,
        10,
        daemon,
    )
    daemon.stop()
