"""Wire format v1: valid events parse, everything else is a typed rejection with the right reason."""

from __future__ import annotations

import json
import tracemalloc
from datetime import UTC
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from vigil.core.errors import Rejected
from vigil.wire.events import (
    MAX_DEPTH,
    Action,
    CaseEvent,
    Feedback,
    Message,
    SourceRef,
    Suggestion,
    addressed,
    json_schemas,
    parse,
)

LIMITS = {"max_event_bytes": 1024 * 1024, "max_text_bytes": 64 * 1024}


def message(**changes: Any) -> dict[str, Any]:
    event = {
        "type": "message",
        "schema_version": 1,
        "message_id": "m-1",
        "conversation_id": "c-1",
        "tenant": "acme",
        "sent_at": "2026-11-02T09:14:05Z",
        "role": "customer",
        "author": "Dana",
        "text": "My router keeps dropping the connection",
        "metadata": {"channel": "web"},
    }
    event.update(changes)
    return {k: v for k, v in event.items() if v is not ...}


def encode(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode()


def reason(raw: bytes, **limits: int) -> str:
    with pytest.raises(Rejected) as caught:
        parse(raw, **(LIMITS | limits))
    return caught.value.reason


def test_a_valid_message_parses_with_its_fields():
    event = parse(encode(message()), **LIMITS)
    assert isinstance(event, Message)
    assert (event.id, event.conversation_id, event.tenant, event.role) == ("m-1", "c-1", "acme", "customer")
    assert event.sent_at.utcoffset() is not None
    assert event.metadata == {"channel": "web"}


def test_optional_fields_may_be_absent_and_unknown_fields_are_ignored():
    event = parse(encode(message(tenant=..., author=..., metadata=..., future_field=[1, 2])), **LIMITS)
    assert isinstance(event, Message)
    assert event.tenant is None and event.author is None


def test_case_and_feedback_events_parse():
    case = parse(
        encode(
            {
                "type": "case",
                "schema_version": 1,
                "event_id": "e-1",
                "conversation_id": "c-1",
                "at": "2026-11-02T09:14:05+01:00",
                "event": "closed",
                "resolution": {"resolved_by": "human", "summary": "Refunded", "csat": 5},
            }
        ),
        **LIMITS,
    )
    assert isinstance(case, CaseEvent) and case.resolution is not None and case.resolution.csat == 5
    feedback = parse(
        encode(
            {
                "type": "feedback",
                "schema_version": 1,
                "feedback_id": "f-1",
                "suggestion_id": "s-1",
                "conversation_id": "c-1",
                "verdict": "edited",
                "at": "2026-11-02T09:14:05Z",
                "text": "edited answer",
            }
        ),
        **LIMITS,
    )
    assert isinstance(feedback, Feedback) and feedback.verdict == "edited"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"", "empty"),
        (b"\xff\xfe{}", "invalid_utf8"),
        (b"{not json", "invalid_json"),
        (b'{"a": NaN}', "invalid_json"),
        (b"[" * 100_000, "too_deep"),
        (b"[1, 2]", "not_an_object"),
        (b'"text"', "not_an_object"),
        (encode(message(type="complaint")), "unknown_type"),
        (encode(message(type=...)), "unknown_type"),
        (encode(message(schema_version=2)), "unsupported_schema_version"),
        (encode(message(schema_version=True)), "unsupported_schema_version"),
        (encode(message(schema_version="1")), "unsupported_schema_version"),
        (encode(message(message_id=...)), "invalid_field"),
        (encode(message(text=5)), "invalid_field"),
        (encode(message(role="manager")), "invalid_field"),
        (encode(message(sent_at="2026-11-02T09:14:05")), "invalid_field"),
        (encode(message(sent_at=1_700_000_000)), "invalid_field"),
        (encode(message(conversation_id="")), "invalid_field"),
        (encode(message(text="nul \x00 byte")), "invalid_field"),
        (b'{"type":"message","schema_version":1,"text":"\\ud800"}', "invalid_field"),
        (
            encode(
                {
                    "type": "case",
                    "schema_version": 1,
                    "event_id": "e",
                    "conversation_id": "c",
                    "at": "2026-11-02T09:14:05Z",
                    "event": "status",
                }
            ),
            "invalid_field",
        ),
        (encode(message(text="x" * 70_000)), "text_too_long"),
    ],
)
def test_bad_records_are_rejected_with_a_stable_reason(raw: bytes, expected: str):
    assert reason(raw) == expected


def test_limits_are_settings():
    raw = encode(message(text="é" * 600))  # 1,200 bytes of UTF-8
    assert reason(raw, max_text_bytes=1000) == "text_too_long"
    assert reason(raw, max_event_bytes=500) == "too_large"
    assert isinstance(parse(raw, **LIMITS), Message)


def test_rejection_detail_names_the_field():
    with pytest.raises(Rejected) as caught:
        parse(encode(message(text=5)), **LIMITS)
    assert "text" in caught.value.detail


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=512))
def test_arbitrary_bytes_never_raise_anything_but_a_rejection(raw: bytes):
    try:
        parse(raw, **LIMITS)
    except Rejected as exc:
        assert exc.reason


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
FIELDS = st.sampled_from(
    [
        "type",
        "schema_version",
        "message_id",
        "conversation_id",
        "tenant",
        "sent_at",
        "role",
        "text",
        "metadata",
        "event",
        "at",
        "event_id",
        "feedback_id",
        "verdict",
        "resolution",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(FIELDS, JSON, max_size=10), st.sampled_from(["message", "case", "feedback", "x"]))
def test_arbitrary_json_objects_never_raise_anything_but_a_rejection(obj: dict[str, Any], kind: str):
    obj = {"type": kind, "schema_version": 1, **obj}
    try:
        event = parse(json.dumps(obj).encode(), **LIMITS)
    except Rejected as exc:
        assert exc.reason
    else:
        assert event.type == obj["type"]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.text(min_size=1, max_size=40))
def test_any_text_round_trips(text: str, conversation_id: str):
    raw = encode(message(text=text, conversation_id=conversation_id))
    try:
        event = parse(raw, **LIMITS)
    except Rejected as exc:
        assert exc.reason == "invalid_field"  # NUL characters and lone surrogates only
        assert "\x00" in text + conversation_id or any(0xD800 <= ord(c) <= 0xDFFF for c in text + conversation_id)
    else:
        assert isinstance(event, Message) and event.text == text


def test_suggestions_serialise_to_v1():
    suggestion = Suggestion(
        suggestion_id="s-1",
        conversation_id="c-1",
        tenant="acme",
        in_reply_to="m-1",
        created_at="2026-11-02T09:14:06Z",  # type: ignore[arg-type]
        kind="answer",
        text="Restart the hub",
        confidence=0.8,
        sources=[SourceRef(kind="faq", id="faq-1")],
        latency_ms=12.5,
    )
    wire = json.loads(suggestion.to_json())
    assert wire["type"] == "suggestion" and wire["schema_version"] == 1
    assert wire["sources"] == [{"kind": "faq", "id": "faq-1"}]
    assert "action" not in wire


def suggestion_of_kind(kind: str) -> Suggestion:
    return Suggestion(
        suggestion_id="s-1",
        conversation_id="c-1",
        tenant="acme",
        created_at="2026-11-02T09:14:06Z",  # type: ignore[arg-type]
        kind=kind,
        text="Restart the hub",
        confidence=0.8,
        latency_ms=1.0,
    )


def test_a_suggestion_kind_is_any_short_snake_case_name():
    assert suggestion_of_kind("stock_check").kind == "stock_check"  # a capability's own kind needs no wire change
    for kind in ("", "Answer", "next-step", "1st", "a" * 33):
        with pytest.raises(ValidationError):
            suggestion_of_kind(kind)


def test_an_action_goes_out_as_the_same_json_object_and_comes_back_typed():
    action = {"name": "refund_order", "arguments": {"order": "A-1", "amount": 12.5}, "needs_approval": True}
    suggestion = Suggestion(
        suggestion_id="s-2",
        conversation_id="c-1",
        tenant="acme",
        created_at="2026-11-02T09:14:06Z",  # type: ignore[arg-type]
        kind="action",
        text="Refund order A-1",
        confidence=0.9,
        action=Action.model_validate(action),
        latency_ms=3.0,
    )
    wire = json.loads(suggestion.to_json())
    assert wire["action"] == action  # fields beyond name and arguments are kept as they came
    back = Suggestion.model_validate_json(suggestion.to_json())
    assert isinstance(back.action, Action) and back.action.name == "refund_order"
    assert back.action.arguments == {"order": "A-1", "amount": 12.5}
    assert Action(name="close_case").model_dump() == {"name": "close_case", "arguments": {}}
    with pytest.raises(ValueError, match="name"):
        Action.model_validate({"arguments": {}})


def test_published_schemas_match_the_models():
    schemas = json_schemas()
    assert set(schemas) == {"message", "case", "feedback", "suggestion"}
    assert "text" in schemas["message"]["required"]
    with open("docs/wire-format.md", encoding="utf-8") as doc:
        text = doc.read()
    for name, schema in schemas.items():
        assert json.dumps(schema, indent=2) in text, (
            f"docs/wire-format.md is out of date for {name}: run `vigil schema`"
        )


def test_an_event_takes_the_tenant_its_topic_names_and_may_not_contradict_it():
    anonymous = parse(encode({k: v for k, v in message().items() if k != "tenant"}), **LIMITS)
    assert anonymous.tenant is None
    filled = addressed(anonymous, tenant="acme", conversation_id=anonymous.conversation_id)
    assert filled.tenant == "acme" and filled.id == anonymous.id
    assert addressed(anonymous, tenant=None, conversation_id=None) is anonymous
    named = parse(encode(message(tenant="acme")), **LIMITS)
    assert addressed(named, tenant="acme", conversation_id=None) is named
    for tenant, conversation in (("globex", None), (None, "another-conversation")):
        with pytest.raises(Rejected) as refused:
            addressed(named, tenant=tenant, conversation_id=conversation)
        assert refused.value.reason == "address_mismatch"


@pytest.mark.parametrize("key", ["c-1\udcff", "c" * 300, "*", ""], ids=["not-utf8", "over-long", "star", "empty"])
def test_a_kafka_key_that_is_not_the_conversation_id_is_a_mismatch_whatever_it_holds(key: str):
    # A Kafka key decodes with surrogate escapes, so bytes that are not UTF-8 arrive as lone surrogates.
    event = parse(encode(message()), **LIMITS)
    with pytest.raises(Rejected) as refused:
        addressed(event, tenant=None, conversation_id=key)
    assert refused.value.reason == "address_mismatch"


# Nesting depth and timestamp range (issue 8, items 4 and 11).


def nested(depth: int, key: str = "k", leaf: object = "x") -> dict[str, Any]:
    """A message whose record nests objects ``depth`` deep in all (the record itself is level 1)."""
    value: object = leaf
    for _ in range(depth - 1):
        value = {key: value}
    return message(metadata=value)


def test_nesting_up_to_the_cap_is_accepted_and_one_level_more_is_too_deep():
    assert isinstance(parse(encode(nested(MAX_DEPTH)), **LIMITS), Message)
    with pytest.raises(Rejected) as caught:
        parse(encode(nested(MAX_DEPTH + 1)), **LIMITS)
    assert caught.value.reason == "too_deep"
    assert caught.value.detail.startswith("metadata.k.k")


def test_a_rejection_deep_inside_still_names_its_path():
    with pytest.raises(Rejected) as caught:
        parse(encode(message(metadata={"a": [1, {"b": "nul \x00"}], "c\x00": 2})), **LIMITS)
    assert caught.value.reason == "invalid_field"
    assert caught.value.detail == "metadata.a[1].b: contains a NUL character"


@pytest.mark.parametrize("literal", ["1e999", "-1e400", "1" + "0" * 400 + ".5"])
def test_a_number_too_large_for_a_float_is_refused_naming_its_path(literal: str):
    raw = encode(message(metadata={"a": [1, {"b": 0}]})).replace(b'"b": 0', b'"b": ' + literal.encode())
    with pytest.raises(Rejected) as caught:
        parse(raw, **LIMITS)
    assert caught.value.reason == "invalid_field"
    assert caught.value.detail == "metadata.a[1].b: not a finite number"


@pytest.mark.parametrize("escaped", ["\\u0000", "\\ud800"])
def test_a_nul_or_a_lone_surrogate_written_as_an_escape_is_refused_naming_its_path(escaped: str):
    raw = encode(message(metadata={"a": {"b": "x"}})).replace(b'"b": "x"', b'"b": "x' + escaped.encode() + b'"')
    with pytest.raises(Rejected) as caught:
        parse(raw, **LIMITS)
    assert caught.value.reason == "invalid_field"
    assert caught.value.detail.startswith("metadata.a.b: contains a")


@pytest.mark.parametrize("depth", [500, 9_000, 100_000])
def test_a_deeply_nested_megabyte_is_refused_as_too_deep_in_bounded_memory(depth: int):
    # json.loads parses 500 levels on every Python version, 9,000 on 3.13 only (its C recursion limit is about
    # 10,000), 100,000 on none; the keys fill the record up to about 1 MiB.
    key = json.dumps("k" * max(1, (LIMITS["max_event_bytes"] - 400) // depth - 6))  # a level: {"k…k": …}
    head = encode(message(metadata=...))[:-1].decode() + ', "metadata": '
    raw = (head + f"{{{key}: " * (depth - 1) + '"x"' + "}" * depth).encode()
    assert raw.count(b"{") == raw.count(b"}") == depth and len(raw) <= LIMITS["max_event_bytes"]
    tracemalloc.start()
    try:
        with pytest.raises(Rejected) as caught:
            parse(raw, **LIMITS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 * 1024 * 1024, f"parsing took {peak / 2**20:.0f} MiB at its peak"
    assert caught.value.reason == "too_deep"


@pytest.mark.parametrize(
    "at",
    ["1970-01-01T00:00:00Z", "1970-01-01T00:30:00-01:00", "9999-12-31T23:59:59.999999Z", "9999-12-31T23:30:00+01:00"],
)
def test_timestamps_from_1970_to_9999_are_accepted(at: str):
    event = parse(encode(message(sent_at=at)), **LIMITS)
    assert event.occurred_at.utcoffset() is not None
    assert 1970 <= event.occurred_at.astimezone(UTC).year <= 9999


@pytest.mark.parametrize(
    "at",
    [
        "0001-01-01T00:00:00+01:00",  # year 0 in UTC
        "1969-12-31T23:59:59.999999Z",
        "1970-01-01T00:30:00+01:00",  # 1969 in UTC
        "9999-12-31T23:30:00-01:00",  # year 10000 in UTC
        "1066-10-14T09:00:00Z",
    ],
)
def test_timestamps_outside_1970_to_9999_are_refused(at: str):
    assert reason(encode(message(sent_at=at))) == "timestamp_out_of_range"
    case = {"type": "case", "schema_version": 1, "event_id": "e", "conversation_id": "c", "event": "opened", "at": at}
    assert reason(encode(case)) == "timestamp_out_of_range"


@pytest.mark.parametrize(
    "at",
    [
        "1700000000",  # pydantic alone reads a number of seconds
        "253402300799",  # or, past 2e10, of milliseconds (1978)
        "1700000000.5",
        "2026-11-30_09:00:00Z",
        "2026-11-30T09:00Z",  # no seconds
        "2026-11-30T09:00:00+0100",  # no colon in the offset
    ],
)
def test_a_timestamp_that_is_not_rfc_3339_is_refused(at: str):
    assert reason(encode(message(sent_at=at))) == "invalid_field"
    feedback = {"type": "feedback", "schema_version": 1, "feedback_id": "f", "suggestion_id": "s"}
    assert reason(encode({**feedback, "conversation_id": "c", "verdict": "accepted", "at": at})) == "invalid_field"


@pytest.mark.parametrize("at", ["2026-11-30 09:00:00Z", "2026-11-30t09:00:00.5z", "2026-11-30T09:00:00-23:59"])
def test_rfc_3339_spellings_are_accepted(at: str):
    assert parse(encode(message(sent_at=at)), **LIMITS).occurred_at.utcoffset() is not None


def test_no_event_may_name_the_tenant_that_means_every_tenant():
    with pytest.raises(Rejected) as refused:
        parse(encode(message(tenant="*")), **LIMITS)
    assert refused.value.reason == "invalid_field" and "tenant" in refused.value.detail
    anonymous = parse(encode(message(tenant=...)), **LIMITS)
    with pytest.raises(Rejected) as refused:
        addressed(anonymous, tenant="*", conversation_id=None)
    assert refused.value.reason == "invalid_field"
    assert addressed(anonymous, tenant="a*", conversation_id=None).tenant == "a*"  # only the wildcard itself
