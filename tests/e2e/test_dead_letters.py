"""Malformed records: each lands on the dead-letter topic unchanged, with its reason, and never blocks the stream."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest

from tests.conftest import Topics, create_topics
from tests.e2e.harness import Database, VigilCli, VigilProcess, case, eventually, message
from tests.kafka_client import committed, produce, read_topic
from vigil.dev.broker import EmbeddedBroker

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


# --- Dead letters that do not fit, dead letters that cannot be written, and the Kafka key ---------------------------

INPUT_LIMIT = 1024 * 1024  # the default VIGIL_INGEST__MAX_EVENT_BYTES, and what vigil's producer may send at most


def sized(event: dict[str, object], size: int) -> bytes:
    """``event`` as JSON of exactly ``size`` bytes, its text padded."""
    base = dumps({**event, "text": ""})
    return dumps({**event, "text": "a" * (size - len(base))})


async def until_all_committed(kafka: EmbeddedBroker, topics: Topics, count: int, daemon: VigilProcess) -> None:
    """Wait until the group has committed every one of the ``count`` records of the input topic."""
    ends = Counter(r.partition for r in read_topic(kafka.bootstrap, topics.input, expect=count))
    await eventually(
        f"offsets {dict(ends)} committed",
        lambda: all(committed(kafka.bootstrap, topics.group, topics.input)[p] == n for p, n in ends.items()),
        process=daemon,
        show=lambda: committed(kafka.bootstrap, topics.group, topics.input),
    )


async def test_dead_letters_too_big_for_the_topic_are_cut_to_fit_and_never_block(
    vigil: VigilCli, kafka: EmbeddedBroker, topics: Topics, sqlite_url: str
) -> None:
    conversation = "dlq-big"
    key = conversation.encode()
    near = sized(message(conversation, "big-near"), INPUT_LIMIT - 200)  # fits the limit, its dead letter does not
    over = sized(message(conversation, "big-over"), INPUT_LIMIT + 200)
    heavy = (key, b"not json", [("padding", b"h" * INPUT_LIMIT)])  # only vigil's own headers can fit
    stream = [
        (key, dumps(message(conversation, "big-good-0"))),
        (key, near),
        (key, dumps(message(conversation, "big-good-1"))),
        (key, over),
        (key, dumps(message(conversation, "big-good-2"))),
        heavy,
        (key, dumps(message(conversation, "big-good-3"))),
        (None, None),  # neither key nor value: the producer needs one of them for the dead letter
    ]
    await create_topics(kafka.bootstrap, topics)
    produce(kafka.bootstrap, topics.input, stream)
    daemon = vigil.daemon(kafka.bootstrap, topics, sqlite_url)
    db = Database(sqlite_url)
    await db.reach("message", 4, daemon)
    assert db.message_ids(conversation) == [f"big-good-{n}" for n in range(4)]

    dead = {r.headers["vigil.dlq.reason"]: r for r in read_topic(kafka.bootstrap, topics.dlq, expect=4)}
    assert sorted(dead) == [b"empty", b"invalid_json", b"text_too_long", b"too_large"]
    for reason, original in ((b"text_too_long", near), (b"too_large", over)):
        letter = dead[reason]
        assert letter.key == key
        assert letter.headers["vigil.dlq.truncated"] == b"value"
        assert letter.headers["vigil.dlq.original_size"] == str(len(original)).encode()
        assert letter.value and original.startswith(letter.value) and len(letter.value) < len(original)
        assert len(letter.value) > INPUT_LIMIT - 1024, "cut more than the headers needed"
    alone = dead[b"invalid_json"]
    assert alone.headers["vigil.dlq.truncated"] == b"record"
    assert alone.headers["vigil.dlq.original_size"] == b"8"
    assert not alone.value and "padding" not in alone.headers
    assert alone.headers["vigil.source.offset"] == b"5"
    assert not dead[b"empty"].value and "vigil.dlq.truncated" not in dead[b"empty"].headers

    await until_all_committed(kafka, topics, len(stream), daemon)
    assert daemon.metric("vigil_events_dead_lettered_total", reason="too_large") == 1
    assert daemon.metric("vigil_dead_letter_failures_total", reason="too_large") == 0
    daemon.stop()


async def test_a_dead_letter_that_keeps_failing_is_tried_at_most_the_ceiling_then_counted_and_passed(
    vigil: VigilCli, kafka: EmbeddedBroker, topics: Topics, sqlite_url: str
) -> None:
    conversation = "dlq-ceiling"
    key = conversation.encode()
    stream = [(key, b"not json"), (key, dumps(message(conversation, "ceiling-good")))]
    await create_topics(kafka.bootstrap, topics)
    produce(kafka.bootstrap, topics.input, stream)
    daemon = vigil.daemon(
        kafka.bootstrap,
        # The broker refuses this name; the producer takes it for a topic not there yet, a failure worth retrying.
        replace(topics, dlq="no such topic!"),
        sqlite_url,
        VIGIL_KAFKA__CREATE_TOPICS="false",
        VIGIL_KAFKA__REQUEST_TIMEOUT_S="1",
        VIGIL_INGEST__DEAD_LETTER_ATTEMPTS="3",
    )
    db = Database(sqlite_url)
    await db.reach("message", 1, daemon)
    await until_all_committed(kafka, topics, len(stream), daemon)
    assert daemon.metric("vigil_dead_letter_failures_total", reason="invalid_json") == 1
    # It was retried (the exact count of tries is checked in tests/flow/test_ingest.py; other broker retries, such as a
    # slow commit, count here too), and then let go rather than held for good.
    assert daemon.metric("vigil_retries_total", dependency="broker") >= 2, "3 attempts are 2 retries"
    assert daemon.metric("vigil_events_dead_lettered_total", reason="invalid_json") == 0
    daemon.stop()


async def test_the_kafka_key_must_name_the_conversation_and_may_be_left_out(
    vigil: VigilCli, kafka: EmbeddedBroker, topics: Topics, sqlite_url: str
) -> None:
    conversation = "dlq-key"
    elsewhere = dumps(message(conversation, "key-elsewhere"))
    stream: list[tuple[bytes | None, bytes | None]] = [
        (conversation.encode(), dumps(message(conversation, "key-right"))),
        (b"dlq-key-2", elsewhere),  # would put the conversation on a second partition
        (None, dumps(message(conversation, "key-none"))),  # many producers set no key: accepted
        ("dlq-kéy".encode(), dumps(message("dlq-kéy", "key-unicode"))),  # the key is the id's UTF-8 bytes
    ]
    await create_topics(kafka.bootstrap, topics)
    produce(kafka.bootstrap, topics.input, stream)
    daemon = vigil.daemon(kafka.bootstrap, topics, sqlite_url)
    db = Database(sqlite_url)
    await db.reach("message", 3, daemon)
    assert sorted(db.message_ids(conversation)) == ["key-none", "key-right"]
    assert db.message_ids("dlq-kéy") == ["key-unicode"]
    (letter,) = read_topic(kafka.bootstrap, topics.dlq, expect=1)
    assert (letter.key, letter.value) == (b"dlq-key-2", elsewhere)
    assert letter.headers["vigil.dlq.reason"] == b"address_mismatch"
    assert b"dlq-key-2" in letter.headers["vigil.dlq.detail"]
    assert daemon.metric("vigil_events_dead_lettered_total", reason="address_mismatch") == 1
    daemon.stop()
