"""Malformed records: each lands on the dead-letter topic unchanged, with its reason, and never blocks the stream."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.conftest import Topics, create_topics
from tests.e2e.harness import Database, VigilCli, case, message
from tests.kafka_client import produce, read_topic
from vigil.broker import EmbeddedBroker

pytestmark = pytest.mark.e2e

MAX_TEXT_BYTES = 1000
MAX_EVENT_BYTES = 8000
KEY = b"dlq-c1"  # bad and good records share a key, so they share a partition: a poison record must not block it


def dumps(event: dict[str, object]) -> bytes:
    return json.dumps(event, ensure_ascii=False).encode()


def bad_records() -> list[tuple[bytes | None, str]]:
    """(value, expected reason) for each kind of bad input."""
    good = message("dlq-c1", "unused", "hi")
    no_text = {k: v for k, v in good.items() if k != "text"}
    deep: object = "bottom"
    for _ in range(100):
        deep = [deep]
    return [
        (b"this is not json {", "invalid_json"),
        (b"[1, 2, 3]", "not_an_object"),
        (b'"just a string"', "not_an_object"),
        (b'{"type": "message", "schema_version": 1, "text": NaN}', "invalid_json"),
        (dumps({**good, "type": "reaction", "message_id": "bad-type"}), "unknown_type"),
        (dumps({k: v for k, v in good.items() if k != "type"}), "unknown_type"),
        (dumps({**good, "schema_version": 2, "message_id": "bad-v2"}), "unsupported_schema_version"),
        (dumps({**good, "schema_version": "1", "message_id": "bad-v1s"}), "unsupported_schema_version"),
        (dumps({**no_text, "message_id": "bad-missing"}), "invalid_field"),
        (dumps({**good, "text": 5, "message_id": "bad-int"}), "invalid_field"),
        (dumps({**good, "role": "robot", "message_id": "bad-role"}), "invalid_field"),
        (dumps({**good, "sent_at": "2026-11-02T09:00:00", "message_id": "bad-naive"}), "invalid_field"),
        (dumps({**good, "text": "nul \u0000 inside", "message_id": "bad-nul"}), "invalid_field"),
        (dumps(case("dlq-c1", "bad-status", "status")), "invalid_field"),
        (dumps(case("dlq-c1", "bad-assign", "assigned")), "invalid_field"),
        (dumps({**good, "metadata": {"nested": deep}, "message_id": "bad-deep"}), "too_deep"),
        (dumps({**good, "sent_at": "0001-01-01T00:00:00+01:00", "message_id": "bad-year"}), "timestamp_out_of_range"),
        # 600 characters but 1200 bytes: the limit is on UTF-8 bytes.
        (dumps({**good, "text": "é" * 600, "message_id": "bad-long"}), "text_too_long"),
        (dumps({**good, "text": "a" * (MAX_EVENT_BYTES + 1), "message_id": "bad-huge"}), "too_large"),
        (b'{"type": "message", "text": "\xff\xfe caf\xe9"}', "invalid_utf8"),
        (b"", "empty"),
    ]


async def test_malformed_records_are_dead_lettered_unchanged_and_never_block(
    vigil: VigilCli, kafka: EmbeddedBroker, topics: Topics, sqlite_url: str
) -> None:
    good_ids = []

    def good(n: int, tenant: str | None = None) -> tuple[bytes, bytes]:
        good_ids.append(f"dlq-good-{n:02d}")
        event = message("dlq-c1", f"dlq-good-{n:02d}", f"good {n}")
        if tenant:
            event["tenant"] = tenant
        return KEY, dumps(event)

    # The conversation belongs to tenant acme; the same id from another tenant is refused.
    stream: list[tuple[bytes | None, bytes | None]] = [good(0, tenant="acme")]
    expected_reason: dict[bytes | None, str] = {}
    for n, (value, reason) in enumerate(bad_records(), start=1):
        stream.append((KEY, value))
        expected_reason[value] = reason
        stream.append(good(n))  # right behind each poison record, on the same partition
    at_limit = dumps(message("dlq-c1", "dlq-at-limit", "a" * MAX_TEXT_BYTES))
    stream.append((KEY, at_limit))
    good_ids.append("dlq-at-limit")
    for value in (
        dumps(message("dlq-c1", "dlq-other-tenant", "hi", tenant="globex")),
        dumps(case("dlq-c1", "dlq-other-tenant-case", "escalated", tenant="globex")),
    ):
        stream.append((KEY, value))
        expected_reason[value] = "tenant_mismatch"
    stream.append(good(99, tenant="acme"))
    bad_count = len(expected_reason)

    await create_topics(kafka.bootstrap, topics)
    produce(kafka.bootstrap, topics.input, stream)
    daemon = vigil.daemon(
        kafka.bootstrap,
        topics,
        sqlite_url,
        VIGIL_INGEST__MAX_TEXT_BYTES=str(MAX_TEXT_BYTES),
        VIGIL_INGEST__MAX_EVENT_BYTES=str(MAX_EVENT_BYTES),
    )
    db = Database(sqlite_url)
    await db.reach("message", len(good_ids), daemon)
    assert db.message_ids("dlq-c1") == good_ids
    assert db.query("SELECT id, tenant FROM conversation") == [("dlq-c1", "acme")]

    dead = read_topic(kafka.bootstrap, topics.dlq, expect=bad_count, timeout_s=20)
    sources = {(r.partition, r.offset): r for r in read_topic(kafka.bootstrap, topics.input, expect=len(stream))}
    assert len(dead) == bad_count, f"{len(dead)} of {bad_count} bad records on the DLQ"
    reasons = Counter[str]()
    for letter in dead:
        headers = {k: v.decode() for k, v in letter.headers.items()}
        assert headers["vigil.source.topic"] == topics.input
        source = sources[int(headers["vigil.source.partition"]), int(headers["vigil.source.offset"])]
        assert (letter.key, letter.value or b"") == (source.key, source.value or b""), "not the record as it came"
        want = expected_reason[source.value or b""]
        assert headers["vigil.dlq.reason"] == want, f"{source.value!r}: {headers}"
        assert headers["vigil.dlq.detail"], f"no detail for {want}"
        reasons[want] += 1
    assert sorted(reasons.elements()) == sorted(expected_reason.values())

    for reason, count in reasons.items():
        assert daemon.metric("vigil_events_dead_lettered_total", reason=reason) == count, reason
    assert daemon.metric("vigil_events_consumed_total", type="message") == len(good_ids) + 1
    assert daemon.status("/healthz") == 200
    assert daemon.status("/readyz") == 200
    daemon.stop()
