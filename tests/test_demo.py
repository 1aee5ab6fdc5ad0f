"""The bundled demo traffic: every event is valid v1, and the player re-stamps ids and times."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime

from vigil.demo import bundled_conversations, load_conversations
from vigil.events import Message, parse
from vigil.replay import conversation_key, read_lines


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


def test_keys_come_from_the_conversation_id():
    assert conversation_key(b'{"conversation_id": "c-1"}') == b"c-1"
    assert conversation_key(b"not json") is None
    assert conversation_key(b'{"conversation_id": 5}') is None


async def test_the_player_gives_fresh_ids_and_the_current_time():
    from prometheus_client import CollectorRegistry

    from vigil.backoff import Backoff
    from vigil.clock import ManualClock
    from vigil.demo import DemoTraffic
    from vigil.metrics import Metrics
    from vigil.settings import KafkaSettings
    from vigil.transport.kafka import KafkaPublisher

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
