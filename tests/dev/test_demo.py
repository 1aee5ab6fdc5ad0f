"""The bundled demo traffic: every event is valid v1, its other wordings say the same, and the player re-stamps ids
and times and plays each run in its own words."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime

from vigil.dev.demo import bundled_conversations, load_conversations, load_rewordings, reworded, rewordings_of
from vigil.dev.replay import conversation_key, read_lines
from vigil.wire.events import Message, parse


def test_every_bundled_demo_event_is_valid_v1():
    path = bundled_conversations()
    lines = list(read_lines(path))
    events = [parse(line.value, max_event_bytes=1 << 20, max_text_bytes=1 << 16) for line in lines]
    assert len(events) > 200
    assert len({e.id for e in events}) == len(events)
    kinds = Counter(e.type for e in events)
    assert kinds["message"] > 150 and kinds["case"] > 20
    roles = Counter(e.role for e in events if isinstance(e, Message))
    assert roles["customer"] and roles["analyst"] and roles["bot"]
    assert all(
        line.key == parse(line.value, max_event_bytes=1 << 20, max_text_bytes=1 << 16).conversation_id.encode()
        for line in lines
    )


def test_conversations_are_grouped_in_file_order():
    conversations = load_conversations(bundled_conversations())
    assert len(conversations) >= 20
    for events in conversations:
        assert len({e["conversation_id"] for e in events}) == 1
        assert events[0]["type"] == "case" and events[0]["event"] == "opened"


MONEY = re.compile(r"£\s?\d+(?:,\d{3})*(?:\.\d\d)?|\b\d+\.\d\d\b")
REFERENCES = re.compile(r"\b(?:ORD|CUS|BW)-\d+\b|\b[\w.+-]+@[\w-]+\.[\w.]+\b")


def test_each_customer_and_analyst_message_has_two_other_wordings_that_keep_its_facts_and_promises():
    from zoneinfo import ZoneInfo

    from vigil.progress.commitments import find_promises

    rewordings = load_rewordings(rewordings_of(bundled_conversations()))
    said = {
        e["message_id"]: e
        for c in load_conversations(bundled_conversations())
        for e in c
        if e.get("role") in ("customer", "analyst")
    }
    assert set(rewordings) == set(said)
    london = ZoneInfo("Europe/London")
    for message_id, texts in rewordings.items():
        event = said[message_id]
        assert len(set(texts)) == 2 and event["text"] not in texts, message_id
        sent_at = datetime.fromisoformat(event["sent_at"])
        promised = [p.due_at for p in find_promises(event["text"], sent_at=sent_at, zone=london)]
        for text in texts:
            assert sorted(MONEY.findall(text)) == sorted(MONEY.findall(event["text"])), (message_id, text)
            assert sorted(REFERENCES.findall(text)) == sorted(REFERENCES.findall(event["text"])), (message_id, text)
            if event["role"] == "analyst":
                due = [p.due_at for p in find_promises(text, sent_at=sent_at, zone=london)]
                assert due == promised, (message_id, text)


def test_a_run_picks_one_wording_per_message_the_same_each_time_it_is_asked():
    event = {"type": "message", "message_id": "m-1", "text": "Where is my parcel?"}
    others = {"m-1": ["Any news on my parcel?", "my parcel hasn't come, where is it"]}
    wordings = {reworded(event, others, f"run-{n}")["text"] for n in range(30)}
    assert wordings == {"Where is my parcel?", *others["m-1"]}
    assert reworded(event, others, "run-a") == reworded(event, others, "run-a")
    assert reworded(event, {}, "run-a") is event  # nothing to pick from: the script's own
    assert event["text"] == "Where is my parcel?"  # the script is not changed


def test_keys_come_from_the_conversation_id():
    assert conversation_key(b'{"conversation_id": "c-1"}') == b"c-1"
    assert conversation_key(b"not json") is None
    assert conversation_key(b'{"conversation_id": 5}') is None


async def test_the_player_gives_fresh_ids_and_the_current_time():
    from prometheus_client import CollectorRegistry

    from vigil.core.clock import ManualClock
    from vigil.core.metrics import Metrics
    from vigil.core.retry import Backoff
    from vigil.dev.demo import DemoTraffic
    from vigil.transport.kafka import KafkaPublisher
    from vigil.transport.settings import KafkaSettings

    clock = ManualClock(datetime(2026, 12, 1, 8, 0, tzinfo=UTC))
    player = DemoTraffic(
        [],
        publisher=KafkaPublisher(KafkaSettings()),
        topic="t",
        clock=clock,
        backoff=Backoff(clock, Metrics(CollectorRegistry())),
        pace_s=1,
        parallel=1,
    )
    original = {
        "type": "message",
        "schema_version": 1,
        "message_id": "demo-c01-m01",
        "conversation_id": "demo-c01",
        "sent_at": "2026-11-02T09:00:00Z",
        "role": "customer",
        "text": "hi",
    }
    fresh = player._restamp(original, "abc-1")
    assert fresh["message_id"] == "demo-c01-m01-abc-1" and fresh["conversation_id"] == "demo-c01-abc-1"
    assert fresh["sent_at"] == "2026-12-01T08:00:00Z"
    assert isinstance(parse(json.dumps(fresh).encode(), max_event_bytes=1 << 20, max_text_bytes=1 << 16), Message)


# The demo's broker port and the file through which `vigil replay` and `vigil send` find a running demo.


def test_the_demo_broker_takes_the_port_it_is_given_when_free():
    import socket

    from vigil.dev.broker import EmbeddedBroker, free_port

    port = free_port()
    with EmbeddedBroker(port=port, fallback=True) as broker:
        assert not broker.fell_back
        assert broker.bootstrap == f"127.0.0.1:{port}"
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass


def test_a_taken_demo_broker_port_falls_back_to_a_free_one_and_says_so():
    import socket

    from vigil.dev.broker import EmbeddedBroker

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        with EmbeddedBroker(port=taken, fallback=True) as broker:
            assert broker.fell_back
            assert broker.port != taken
            with socket.create_connection(("127.0.0.1", broker.port), timeout=2):
                pass


def test_the_demo_broker_port_defaults_to_9092():
    from vigil.app.settings import Settings

    assert Settings().demo.broker_port == 9092


def test_the_discovery_file_is_found_while_its_demo_runs_and_gone_after(tmp_path):
    import os
    import subprocess
    import sys

    from vigil.dev import discovery

    address = discovery.DemoAddress("127.0.0.1:9092", "in", "out", "dlq", "http://127.0.0.1:8080/panel", os.getpid())
    assert discovery.find(tmp_path) is None
    discovery.publish(tmp_path, address)
    assert discovery.find(tmp_path) == address
    assert [p.name for p in tmp_path.iterdir()] == ["demo.json"]  # nothing left aside
    discovery.withdraw(tmp_path, os.getpid() + 1)  # not the writer: the file stays
    assert discovery.find(tmp_path) == address
    discovery.withdraw(tmp_path, os.getpid())
    assert discovery.find(tmp_path) is None and not (tmp_path / "demo.json").exists()

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    killed = discovery.DemoAddress("127.0.0.1:1", "in", "out", "dlq", "http://x/panel", int(gone.stdout))
    discovery.publish(tmp_path, killed)  # a demo killed before it could clean up
    assert discovery.find(tmp_path) is None


async def test_a_run_plays_each_conversation_once_in_its_own_words_with_its_customer_renamed_everywhere():
    from prometheus_client import CollectorRegistry

    from vigil.core.clock import SystemClock
    from vigil.core.metrics import Metrics
    from vigil.core.retry import Backoff
    from vigil.dev.demo import DemoTraffic, _with_names, bundled_conversations, load_conversations, renamed

    conversations = load_conversations(bundled_conversations())
    rewordings = load_rewordings(rewordings_of(bundled_conversations()))
    sent: list[dict[str, object]] = []

    class Publisher:
        async def send(self, topic: str, value: bytes, key: bytes) -> None:
            sent.append(json.loads(value))

    clock = SystemClock()
    player = DemoTraffic(
        conversations,
        publisher=Publisher(),  # type: ignore[arg-type]
        topic="t",
        clock=clock,
        backoff=Backoff(clock, Metrics(CollectorRegistry())),
        pace_s=0.0001,
        parallel=8,
        rewordings=rewordings,
    )
    await player.run("run-a")
    assert len(sent) == sum(map(len, conversations))  # every event once: no second round
    assert len({e["conversation_id"] for e in sent}) == len(conversations)
    names = renamed(conversations, "run-a")
    assert names == renamed(conversations, "run-a") != renamed(conversations, "run-b")
    assert len(set(names.values())) == len(names)  # each customer their own new name
    said = " ".join(str(e.get("text", "")) + " " + str(e.get("author", "")) for e in sent)
    for old in names:
        assert re.search(rf"\b{old.split()[0]}\b", said) is None, old  # nor their first name, as a greeting says it
    daniel = names["Daniel Okafor"]
    assert any(e.get("author") == daniel for e in sent)
    # In its own words: about two thirds of the messages are not the script's (each picks one of three wordings).
    scripted = {e["message_id"]: _with_names(e, names)["text"] for c in conversations for e in c if "text" in e}
    played = [e for e in sent if str(e.get("message_id", "")).removesuffix("-run-a") in rewordings]
    unscripted = [e for e in played if e["text"] != scripted[str(e["message_id"]).removesuffix("-run-a")]]
    assert len(played) == len(rewordings) and 0.5 < len(unscripted) / len(played) < 0.85
