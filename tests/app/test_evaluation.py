"""`vigil eval replay` in process: the real pipeline on a file of v1 events, on the events' own time."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.conftest import RememberingEmbedder, case_store, make_settings, views_of
from vigil.app.evaluation import replay
from vigil.app.settings import Settings

ROOT = Path(__file__).resolve().parent.parent.parent
DEMO = ROOT / "knowledge" / "demo" / "conversations.jsonl"
HELP_CENTRE = [ROOT / "knowledge" / "articles", ROOT / "knowledge" / "faqs"]
QUESTION = "How do I install my eSIM?"


def demo_lines(conversations: int) -> list[str]:
    """The bundled demo traffic's first ``conversations`` conversations, as lines."""
    lines, seen = [], []
    for line in DEMO.read_text("utf-8").splitlines():
        cid = json.loads(line)["conversation_id"]
        if cid not in seen:
            seen.append(cid)
        if len(seen) > conversations:
            break
        lines.append(line)
    return lines


def message(number: int, at: str, text: str, *, role: str = "customer", conversation: str = "c1", **more: Any) -> str:
    event = {
        "type": "message",
        "schema_version": 1,
        "message_id": f"m{number}",
        "conversation_id": conversation,
        "sent_at": at,
        "role": role,
        "text": text,
    }
    return json.dumps(event | more)


def settings_for(tmp_path: Path, db_url: str | None = None, *, answers: bool = True) -> Settings:
    return make_settings(
        tmp_path=tmp_path, db_url=db_url, answers={"enabled": answers}, knowledge={"paths": HELP_CENTRE}
    )


def written(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / name
    path.write_text("".join(f"{line}\n" for line in lines), "utf-8")
    return path


async def conversations(settings: Settings) -> list[str]:
    store = case_store(settings)
    try:
        async with views_of(store).reading() as conn:
            return list((await conn.execute(sa.text("SELECT id FROM conversation ORDER BY id"))).scalars())
    finally:
        await store.close()


class NoModel:
    """An embedder that must not be used."""

    name = "none"
    dimensions = 384

    def load(self) -> None:
        raise AssertionError("the model was loaded")

    def embed(self, texts: object) -> object:
        raise AssertionError("something was embedded")


async def test_two_replays_from_empty_write_the_same_suggestions_byte_for_byte(
    tmp_path: Path, embedder: RememberingEmbedder
):
    events = written(tmp_path, "demo.jsonl", demo_lines(4))
    settings = settings_for(tmp_path)
    first = await replay(events, tmp_path / "first.jsonl", settings, fresh=True, embedder=embedder)
    second = await replay(events, tmp_path / "second.jsonl", settings, fresh=True, embedder=embedder)
    said = (tmp_path / "first.jsonl").read_bytes()
    assert said and said == (tmp_path / "second.jsonl").read_bytes()
    assert first.suggestions == second.suggestions and first.silences == second.silences


async def test_suggestions_are_made_at_the_simulated_time_of_the_message_they_answer(
    tmp_path: Path, embedder: RememberingEmbedder
):
    lines = demo_lines(4)
    events = written(tmp_path, "demo.jsonl", lines)
    await replay(events, tmp_path / "out.jsonl", settings_for(tmp_path), fresh=True, embedder=embedder)
    parsed = [json.loads(line) for line in lines]
    sent = {e.get("message_id") or e["event_id"]: e.get("sent_at") or e["at"] for e in parsed}
    suggestions = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert suggestions
    for suggestion in suggestions:
        assert suggestion["type"] == "suggestion" and suggestion["schema_version"] == 1
        assert suggestion["latency_ms"] == 0.0
        if "in_reply_to" in suggestion:
            assert suggestion["created_at"] == sent[suggestion["in_reply_to"]]
        else:  # a timer's, at its own moment between two events
            assert min(sent.values()) < suggestion["created_at"] <= max(sent.values())


async def test_the_summary_counts_events_suggestions_and_silences_and_gives_the_simulated_span(
    tmp_path: Path, embedder: RememberingEmbedder
):
    lines = demo_lines(4)
    events = written(tmp_path, "demo.jsonl", lines)
    summary = await replay(events, tmp_path / "out.jsonl", settings_for(tmp_path), fresh=True, embedder=embedder)
    parsed = [json.loads(line) for line in lines]
    assert dict(summary.events) == {
        kind: sum(e["type"] == kind for e in parsed)
        for kind in ("message", "case")
        if any(e["type"] == kind for e in parsed)
    }
    out = [json.loads(line)["kind"] for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert summary.suggestions == {kind: out.count(kind) for kind in set(out)} and summary.suggestions["answer"] > 0
    assert summary.silences["not_a_customer_message"] == sum(e.get("role") != "customer" for e in parsed)
    times = [datetime.fromisoformat(e.get("sent_at") or e["at"]) for e in parsed]
    assert (summary.first, summary.last) == (times[0], max(times))
    shown = "\n".join(summary.lines(tmp_path / "out.jsonl"))
    assert f"suggestions: {len(out)} (answer {out.count('answer')}" in shown
    assert f"{times[0]:%Y-%m-%dT%H:%M:%S}Z to {max(times):%Y-%m-%dT%H:%M:%S}Z" in shown


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
async def test_fresh_starts_from_an_empty_database_and_chroma_folder(
    tmp_path: Path, db: str, request: pytest.FixtureRequest
):
    db_url = None if db == "sqlite" else request.getfixturevalue("pg_url")
    settings = settings_for(tmp_path, db_url, answers=False)
    earlier = written(tmp_path, "earlier.jsonl", [message(1, "2026-11-02T09:00:00Z", "hi", conversation="old")])
    events = written(tmp_path, "events.jsonl", [message(1, "2026-11-03T09:00:00Z", "hello")])
    await replay(earlier, tmp_path / "out.jsonl", settings)
    again = await replay(events, tmp_path / "out.jsonl", settings)
    assert await conversations(settings) == ["c1", "old"]
    (settings.data_dir / "chroma").mkdir(parents=True)
    (settings.data_dir / "chroma" / "chroma.sqlite3").write_bytes(b"left over")

    fresh = await replay(events, tmp_path / "out.jsonl", settings, fresh=True)
    assert await conversations(settings) == ["c1"]
    assert not (settings.data_dir / "chroma").exists()
    assert again.duplicates == 0 and fresh.duplicates == 0


async def test_without_fresh_a_second_replay_finds_its_events_already_stored_and_says_nothing_again(
    tmp_path: Path, embedder: RememberingEmbedder
):
    events = written(tmp_path, "events.jsonl", [message(1, "2026-11-03T09:00:00Z", QUESTION)])
    settings = settings_for(tmp_path)
    first = await replay(events, tmp_path / "first.jsonl", settings, fresh=True, embedder=embedder)
    second = await replay(events, tmp_path / "second.jsonl", settings, embedder=embedder)
    assert first.suggestions == {"answer": 1} and first.duplicates == 0
    assert second.suggestions == {} and second.duplicates == 1
    assert (tmp_path / "second.jsonl").read_bytes() == b""


async def test_bad_lines_are_named_by_number_and_reason_and_the_rest_are_replayed(tmp_path: Path):
    lines = [
        message(1, "2026-11-03T09:00:00Z", "hello", tenant="acme"),
        "{not json",
        json.dumps({"type": "order", "schema_version": 1}),
        "",
        message(2, "2026-11-03T09:01:00Z", "another tenant's conversation", tenant="globex"),
        message(3, "2026-11-03T09:02:00Z", "still here", tenant="acme"),
    ]
    events = written(tmp_path, "events.jsonl", lines)
    summary = await replay(events, tmp_path / "out.jsonl", settings_for(tmp_path, answers=False), fresh=True)
    assert [(bad.number, bad.reason) for bad in summary.bad] == [
        (2, "invalid_json"),
        (3, "unknown_type"),
        (5, "tenant_mismatch"),
    ]
    assert dict(summary.events) == {"message": 3}
    assert "3 bad lines" in summary.lines(tmp_path / "out.jsonl")[0]


async def test_with_answers_disabled_nothing_is_suggested_and_no_model_is_loaded(tmp_path: Path):
    events = written(tmp_path, "events.jsonl", [message(1, "2026-11-03T09:00:00Z", QUESTION)])
    settings = settings_for(tmp_path, answers=False)
    summary = await replay(events, tmp_path / "out.jsonl", settings, fresh=True, embedder=NoModel())  # type: ignore[arg-type]
    assert summary.suggestions == {} and summary.events == {"message": 1}
    assert (tmp_path / "out.jsonl").read_bytes() == b""
    assert await conversations(settings) == ["c1"]


async def test_time_never_goes_back_so_an_event_older_than_the_one_before_is_handled_late(
    tmp_path: Path, embedder: RememberingEmbedder
):
    lines = [
        message(1, "2026-11-03T10:00:00Z", "hello", conversation="c2"),
        message(2, "2026-11-03T09:00:00Z", QUESTION),  # an hour older than the event before it: stale by then
    ]
    events = written(tmp_path, "events.jsonl", lines)
    summary = await replay(events, tmp_path / "out.jsonl", settings_for(tmp_path), fresh=True, embedder=embedder)
    assert summary.silences.get("stale") == 1 and summary.suggestions == {}
    assert summary.last == datetime.fromisoformat("2026-11-03T10:00:00+00:00")


EXPLAINED = (
    "I'm sorry, that's frustrating. The photo the driver took doesn't match your address, so we treat the parcel "
    "as lost rather than delivered."
)


def resolved_case(n: int, day: str, problem: str, fix: str) -> list[str]:
    """A case a human resolved: opened, the customer's problem, the analyst's fix, closed."""
    cid = f"case-{n}"

    def case_event(at: str, change: str, **more: Any) -> str:
        return json.dumps(
            {"type": "case", "schema_version": 1, "event_id": f"{cid}-{change}", "conversation_id": cid, "at": at}
            | {"event": change}
            | more
        )

    return [
        case_event(f"{day}T09:0{n}:00Z", "opened"),
        message(10 * n + 1, f"{day}T09:0{n}:10Z", problem, conversation=cid),
        message(10 * n + 2, f"{day}T09:0{n}:30Z", EXPLAINED, role="analyst", conversation=cid),
        message(10 * n + 3, f"{day}T09:0{n}:40Z", fix, role="analyst", conversation=cid),
        case_event(f"{day}T09:0{n}:50Z", "closed", resolution={"resolved_by": "human", "csat": 5}),
    ]


@pytest.mark.parametrize("miner", [True, False], ids=["miner on", "miner off"])
async def test_a_problem_analysts_resolved_one_day_is_answered_from_what_was_mined_the_next(
    tmp_path: Path, embedder: RememberingEmbedder, miner: bool
):
    fixes = (
        "I've opened a missing-parcel claim for you. The refund goes back to your card within 3 working days.",
        "I've raised a missing parcel claim; you'll get the refund on your card in 3 working days.",
        "I've logged a missing-parcel claim, so the refund reaches your card within 3 working days.",
    )
    problems = (
        "my parcel says delivered but it never arrived, the photo shows someone else's door",
        "my parcel shows as delivered but it never arrived and the delivery photo is of someone else's door",
        "parcel marked as delivered but I never got it and the delivery photo is a different door",
    )
    lines = [line for n in range(3) for line in resolved_case(n + 1, "2026-11-02", problems[n], fixes[n])]
    lines.append(
        message(
            99, "2026-11-03T10:00:00Z", "tracking says my parcel was delivered but it isn't here", conversation="new"
        )
    )
    settings = make_settings(
        tmp_path=tmp_path, answers={"enabled": True}, knowledge={"paths": []}, miner={"enabled": miner}
    )
    await replay(
        written(tmp_path, "events.jsonl", lines), tmp_path / "out.jsonl", settings, fresh=True, embedder=embedder
    )
    answers = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text("utf-8").splitlines()]
    answered = [a for a in answers if a["in_reply_to"] == "m99"]
    if not miner:
        assert answered == []
        return
    [answer] = answered
    assert answer["sources"][0]["kind"] == "faq" and answer["sources"][0]["id"].startswith("case-")
    assert "3 working days" in answer["text"]


async def test_timers_fire_in_simulated_time_between_the_events(tmp_path: Path):
    lines = [
        message(1, "2026-03-10T09:00:00Z", "Is there a fault on my line?"),
        message(2, "2026-03-10T09:01:00Z", "I'll get back to you within 2 hours.", role="analyst"),
        message(3, "2026-03-10T13:00:00Z", "Hello?? Anyone there?"),
    ]
    events = written(tmp_path, "promise.jsonl", lines)
    summary = await replay(events, tmp_path / "out.jsonl", settings_for(tmp_path, answers=False), fresh=True)
    said = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    follow_ups = [(s["created_at"], s["text"].split(":")[0]) for s in said if s["kind"] == "follow_up"]
    assert follow_ups == [("2026-03-10T10:46:00Z", "Reminder"), ("2026-03-10T11:01:00Z", "Missed")]
    assert summary.suggestions["follow_up"] == 2
