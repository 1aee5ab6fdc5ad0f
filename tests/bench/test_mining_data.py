"""The team's mining evaluation data (bench/data/mining-*): support chats of four fictional companies, v1 events that
``vigil eval replay`` reads, with labels and new phrasings. The checks say what the files promise their readers."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from vigil.flow.settings import IngestSettings
from vigil.wire.events import CaseEvent, Event, Message, parse

DATA = Path(__file__).resolve().parents[2] / "bench" / "data"


@dataclass(frozen=True)
class Company:
    """What a company's files promise beyond the shared rules."""

    tenant: str
    conversations: tuple[int, int]
    """How many conversations the cases file holds (at least, at most)."""
    problems: int
    """How many recurring problems, at least."""
    cases: tuple[int, int]
    """How many human-resolved cases each recurring problem has, copies counted once."""
    phrasings: int
    """How many new phrasings each recurring problem has, at least."""
    copies: int
    """How many cases are near-duplicates of an earlier one (label ``copy_of``)."""
    conflicts: int = 2
    """How many conflict problems, each with two stances."""


COMPANIES = {
    "kestrel": Company("kestrel", (60, 80), 8, (4, 6), 4, 0),
    "hearthlight": Company("hearthlight", (60, 80), 8, (4, 6), 4, 0),
    "copperleaf": Company("copperleaf", (95, 105), 12, (5, 6), 5, 3),
    "thistledown": Company("thistledown", (65, 85), 10, (4, 6), 5, 0, 4),
}
"""Each company by file name: Kestrel Couriers and Thistledown Home (tune), Hearthlight Energy and Copperleaf Money
(test)."""
KINDS = {"recurring", "conflict", "one_off", "thin", "bot", "customer", "reopened"}
RESOLVED_BY = {"bot": "bot", "customer": "customer"}
"""The kinds not resolved by a human; every other kind is."""


@dataclass
class Conversation:
    events: list[Event] = field(default_factory=list)

    @property
    def messages(self) -> dict[str, Message]:
        return {e.message_id: e for e in self.events if isinstance(e, Message)}

    @property
    def changes(self) -> list[CaseEvent]:
        return [e for e in self.events if isinstance(e, CaseEvent)]


def lines(name: str) -> list[str]:
    return (DATA / name).read_text(encoding="utf-8").splitlines()


def records(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines(name)]


@cache
def events(company: str) -> list[Event]:
    limits = IngestSettings()
    return [
        parse(line.encode(), max_event_bytes=limits.max_event_bytes, max_text_bytes=limits.max_text_bytes)
        for line in lines(f"mining-{company}-cases.jsonl")
    ]


def conversations(company: str) -> dict[str, Conversation]:
    found: dict[str, Conversation] = defaultdict(Conversation)
    for event in events(company):
        found[event.conversation_id].events.append(event)
    return dict(found)


def labels(company: str) -> dict[str, dict[str, Any]]:
    return {label["conversation_id"]: label for label in records(f"mining-{company}-labels.jsonl")}


def words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


@pytest.mark.parametrize("company", COMPANIES)
def test_every_line_is_a_v1_event_of_the_company_in_time_order(company: str):
    parsed = events(company)  # parse raises Rejected on a line ingest would refuse
    assert {event.tenant for event in parsed} == {COMPANIES[company].tenant}
    assert len({event.id for event in parsed}) == len(parsed)
    times = [event.occurred_at for event in parsed]
    assert times == sorted(times), "a replay never moves time back: the file is in time order"
    low, high = COMPANIES[company].conversations
    assert low <= len(conversations(company)) <= high
    assert max(times) - min(times) >= timedelta(weeks=5), "spread over several weeks"


@pytest.mark.parametrize("company", COMPANIES)
def test_every_case_opens_and_ends_closed_and_a_reopened_case_closes_twice(company: str):
    for cid, conversation in conversations(company).items():
        changes = conversation.changes
        assert changes[0].event == "opened" and changes[-1].event == "closed", cid
        assert all(c.resolution is not None for c in changes if c.event == "closed"), cid
        closes = sum(c.event == "closed" for c in changes)
        assert closes == 1 + sum(c.event == "reopened" for c in changes), cid
        roles = Counter(m.role for m in conversation.messages.values())
        assert roles["customer"] >= 1, cid


@pytest.mark.parametrize("company", COMPANIES)
def test_labels_cover_every_conversation_once_with_a_known_kind(company: str):
    rows = records(f"mining-{company}-labels.jsonl")
    assert len({row["conversation_id"] for row in rows}) == len(rows)
    assert set(labels(company)) == set(conversations(company))
    assert {row["kind"] for row in rows} == KINDS


@pytest.mark.parametrize("company", COMPANIES)
def test_labelled_messages_exist_in_their_own_conversation_and_have_the_right_role(company: str):
    chats = conversations(company)
    for cid, label in labels(company).items():
        messages = chats[cid].messages
        problem = messages[label["problem_message_id"]]
        assert problem.role == "customer", cid
        resolving = [messages[mid] for mid in label["resolving_message_ids"]]
        expected = "bot" if label["kind"] == "bot" else "analyst"
        assert all(m.role == expected for m in resolving), cid
        # Nothing resolves a thin case or one the customer sorted out alone; everything else has its steps.
        assert bool(resolving) == (label["kind"] not in ("thin", "customer")), cid


@pytest.mark.parametrize("company", COMPANIES)
def test_the_kind_agrees_with_how_the_case_was_closed(company: str):
    chats = conversations(company)
    for cid, label in labels(company).items():
        changes = chats[cid].changes
        final = changes[-1].resolution
        assert final is not None
        assert final.resolved_by == RESOLVED_BY.get(label["kind"], "human"), cid
        assert any(c.event == "reopened" for c in changes) == (label["kind"] == "reopened"), cid
    csat = [c.resolution.csat for conv in chats.values() for c in conv.changes if c.resolution is not None]
    assert sum(score is not None and score <= 2 for score in csat) >= 3, "some customers were unhappy"


@pytest.mark.parametrize("company", COMPANIES)
def test_each_recurring_problem_was_resolved_several_times_by_different_analysts(company: str):
    chats = conversations(company)
    analysts: dict[str, set[str | None]] = defaultdict(set)
    cases: Counter[str] = Counter()
    for cid, label in labels(company).items():
        # A near-duplicate is the same case again: it must not count as more support, nor as another analyst.
        if label["kind"] == "recurring" and not label.get("copy_of"):
            cases[label["problem"]] += 1
            messages = chats[cid].messages
            analysts[label["problem"]] |= {messages[mid].author for mid in label["resolving_message_ids"]}
    spec = COMPANIES[company]
    assert len(cases) >= spec.problems
    assert all(spec.cases[0] <= n <= spec.cases[1] for n in cases.values()), cases
    assert all(len(names) >= 4 for names in analysts.values()), analysts


@pytest.mark.parametrize("company", COMPANIES)
def test_a_copy_repeats_an_earlier_case_of_its_problem_word_for_word(company: str):
    chats = conversations(company)
    rows = labels(company)
    copies = {cid: label["copy_of"] for cid, label in rows.items() if label.get("copy_of")}
    assert len(copies) == COMPANIES[company].copies
    for cid, original in copies.items():
        label, first = rows[cid], rows[original]
        assert label["kind"] == first["kind"] == "recurring", cid
        assert label["problem"] == first["problem"], cid
        assert not first.get("copy_of"), "a copy points at the original, not at another copy"
        copied, told = chats[cid].messages, chats[original].messages
        assert copied[label["problem_message_id"]].text == told[first["problem_message_id"]].text, cid
        resolution = [copied[mid].text for mid in label["resolving_message_ids"]]
        assert resolution == [told[mid].text for mid in first["resolving_message_ids"]], cid
        later = chats[cid].changes[0].occurred_at - chats[original].changes[-1].occurred_at
        assert timedelta(days=1) <= later <= timedelta(days=10), f"{cid} comes a few days after {original}"


@pytest.mark.parametrize("company", COMPANIES)
def test_the_conflict_problems_carry_two_stances_and_one_offs_have_no_problem(company: str):
    stances: dict[str, set[str]] = defaultdict(set)
    for label in labels(company).values():
        if label["kind"] == "conflict":
            stances[label["problem"]].add(label["stance"])
        else:
            assert label["stance"] is None
        if label["kind"] == "one_off":
            assert label["problem"] is None
        if label["kind"] in ("recurring", "conflict", "reopened"):
            assert label["problem"] is not None
    assert len(stances) == COMPANIES[company].conflicts, stances
    assert all(len(s) == 2 for s in stances.values()), stances
    recurring = {label["problem"] for label in labels(company).values() if label["kind"] == "recurring"}
    assert not recurring & set(stances), "a conflict problem is not also a consistent recurring one"


@pytest.mark.parametrize("company", COMPANIES)
def test_phrasings_ask_about_labelled_problems_in_new_words(company: str):
    rows = records(f"mining-{company}-phrasings.jsonl")
    assert len({row["id"] for row in rows}) == len(rows)
    problems = {label["problem"] for label in labels(company).values() if label["kind"] in ("recurring", "conflict")}
    asked = Counter(row["problem"] for row in rows)
    assert set(asked) - {None} <= problems
    recurring = {label["problem"] for label in labels(company).values() if label["kind"] == "recurring"}
    assert all(asked[problem] >= COMPANIES[company].phrasings for problem in recurring), asked
    conflicts = {label["problem"] for label in labels(company).values() if label["kind"] == "conflict"}
    assert all(asked[problem] >= 3 for problem in conflicts), asked
    assert asked[None] >= 10
    said = {words(m.text) for m in events(company) if isinstance(m, Message) and m.role == "customer"}
    assert not [row["text"] for row in rows if words(row["text"]) in said], "a phrasing copies a case's message"
