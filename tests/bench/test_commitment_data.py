"""The team's commitment labels (bench/data/commitments.jsonl, issue 13): analyst and customer chat messages, each with
the promises an analyst made in it and when each is due. The checks say what the file promises its readers."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

DATA = Path(__file__).resolve().parents[2] / "bench" / "data" / "commitments.jsonl"
TENANT_ZONES = {"brightwave": "Europe/London", "copperleaf": "America/New_York", "southerly": "Australia/Sydney"}
"""Each tenant's own time zone: the one a time is read in when the message carries no customer time zone."""
KEYS = {"id", "tenant", "role", "sent_at", "timezone", "text", "commitments", "tags", "note"}
PROMISE_TAGS = {
    "relative", "absolute", "day_part", "end_of_day", "end_of_week", "business_days", "business_hours", "immediate",
    "no_time", "vague_time", "hedged", "on_behalf", "conditional_commitment", "mixed",
}  # fmt: skip
"""Tags of a message that holds at least one commitment."""
NOT_PROMISE_TAGS = {
    "past_tense", "conditional", "question", "offer", "in_chat", "process_info", "negated", "courtesy",
    "customer_promise", "customer_quote", "customer_request",
}  # fmt: skip
"""Tags of a message that sounds like a promise and is none: its commitments list is empty."""
CONTEXT_TAGS = {"dst", "two_promises", "timezone_from_tenant", "other_zone", "explicit_zone", "utc_date_differs"}
CUSTOMER_TAGS = {"customer_promise", "customer_quote", "customer_request"}


@cache
def rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]


def instant(text: str) -> datetime:
    assert text.endswith("Z"), text
    parsed = datetime.fromisoformat(text)
    assert parsed.utcoffset() is not None and not parsed.utcoffset(), text
    return parsed.astimezone(UTC)


def zone(row: dict[str, Any]) -> ZoneInfo:
    """The zone a time without a zone is read in: the customer's when the message carries it, else the tenant's."""
    return ZoneInfo(row["timezone"] or TENANT_ZONES[row["tenant"]])


def dues(row: dict[str, Any]) -> list[datetime]:
    return [instant(c["due_at"]) for c in row["commitments"] if c["due_at"] is not None]


def test_every_line_has_the_documented_fields_and_a_unique_id():
    for row in rows():
        assert set(row) == KEYS, row["id"]
        assert row["tenant"] in TENANT_ZONES, row["id"]
        assert row["role"] in ("analyst", "customer"), row["id"]
        assert row["text"].strip() and isinstance(row["note"], str), row["id"]
        instant(row["sent_at"])
        zone(row)  # an unknown IANA name raises
    assert len({row["id"] for row in rows()}) == len(rows())


def test_every_commitment_quotes_its_text_and_falls_due_after_it_was_made():
    for row in rows():
        spans = [c["span"] for c in row["commitments"]]
        for commitment in row["commitments"]:
            assert set(commitment) == {"what", "span", "due_at"}, row["id"]
            assert commitment["what"].strip(), row["id"]
            assert commitment["span"] in row["text"], row["id"]
        assert all(due >= instant(row["sent_at"]) for due in dues(row)), row["id"]
        starts = sorted((row["text"].index(span), len(span)) for span in spans)
        assert all(a + n <= b for (a, n), (b, _) in pairwise(starts)), f"overlap in {row['id']}"


def test_tags_come_from_the_documented_set_and_agree_with_the_commitments():
    for row in rows():
        tags = set(row["tags"])
        assert tags <= PROMISE_TAGS | NOT_PROMISE_TAGS | CONTEXT_TAGS, row["id"]
        if row["commitments"]:
            assert tags & PROMISE_TAGS and not tags & NOT_PROMISE_TAGS, row["id"]
        else:
            assert tags & NOT_PROMISE_TAGS and not tags & PROMISE_TAGS, row["id"]
        untimed = any(c["due_at"] is None for c in row["commitments"])
        assert untimed == bool(tags & {"no_time", "vague_time"}), row["id"]
        if "immediate" in tags:
            assert instant(row["sent_at"]) in dues(row), row["id"]
        assert ("two_promises" in tags) == (len(row["commitments"]) == 2), row["id"]
        assert len(row["commitments"]) <= 2, row["id"]


def test_customers_never_commit_and_analysts_are_never_tagged_as_customers():
    for row in rows():
        if row["role"] == "customer":
            assert not row["commitments"] and set(row["tags"]) & CUSTOMER_TAGS, row["id"]
        else:
            assert not set(row["tags"]) & CUSTOMER_TAGS, row["id"]


def test_the_zone_tags_say_where_the_time_zone_came_from():
    for row in rows():
        tags = set(row["tags"])
        assert ("timezone_from_tenant" in tags) == (row["timezone"] is None), row["id"]
        foreign = row["timezone"] is not None and row["timezone"] != TENANT_ZONES[row["tenant"]]
        assert ("other_zone" in tags) == foreign, row["id"]


def test_a_dst_message_has_a_promise_whose_local_clock_changed_offset_before_it_fell_due():
    for row in rows():
        if "explicit_zone" in row["tags"]:
            continue  # the text names the zone the time is read in
        at_sending = instant(row["sent_at"]).astimezone(zone(row)).utcoffset()
        crosses = any(due.astimezone(zone(row)).utcoffset() != at_sending for due in dues(row))
        assert ("dst" in row["tags"]) == crosses, row["id"]


def test_the_set_is_as_large_and_as_varied_as_issue_13_asks():
    roles = Counter(row["role"] for row in rows())
    assert roles["analyst"] >= 150 and roles["customer"] >= 25, roles
    tags = Counter(tag for row in rows() for tag in row["tags"])
    assert tags["two_promises"] >= 10 and tags["dst"] >= 10, tags
    for tag in ("relative", "absolute", "business_days", "end_of_day", "no_time", "vague_time", "past_tense"):
        assert tags[tag] >= 5, tag
    for tag in ("conditional", "question", "offer", "conditional_commitment", "explicit_zone", "utc_date_differs"):
        assert tags[tag] >= 3, tag
    assert {row["tenant"] for row in rows()} == set(TENANT_ZONES)
    assert sum(bool(row["commitments"]) for row in rows() if row["role"] == "analyst") >= 120


SHAPE_TAGS = {"duration_bare", "next_weekday", "clock_day", "two_times", "then_offer", "working_time"}
"""The shape tags of the later sets (bench/data/README.md, issue 28); ``conditional`` is the first file's tag."""


@pytest.mark.parametrize(
    "name", ["commitments-shapes.jsonl", "commitments-heldout.jsonl", "commitments-heldout-2.jsonl"]
)
def test_the_later_sets_quote_their_texts_and_customers_never_commit_in_them(name: str):
    later = [json.loads(line) for line in (DATA.parent / name).read_text(encoding="utf-8").splitlines()]
    assert len({row["id"] for row in later}) == len(later)
    for row in later:
        assert set(row) == KEYS and row["role"] in ("analyst", "customer"), row["id"]
        ZoneInfo(row["timezone"] or "UTC")  # an unknown IANA name raises
        assert set(row["tags"]) <= PROMISE_TAGS | NOT_PROMISE_TAGS | CONTEXT_TAGS | SHAPE_TAGS, row["id"]
        assert all(c["span"] in row["text"] for c in row["commitments"]), row["id"]
        assert all(due >= instant(row["sent_at"]) for due in dues(row)), row["id"]
        assert ("two_promises" in row["tags"]) == (len(row["commitments"]) == 2), row["id"]
        if row["role"] == "customer":
            assert not row["commitments"], row["id"]
