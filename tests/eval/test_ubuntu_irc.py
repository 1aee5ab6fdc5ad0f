"""eval/ubuntu_irc.py on a few threads of the real file: v1 events vigil takes, in time order, with roles; and with
``cases``, each thread opened and closed as a case resolved by a human."""

from __future__ import annotations

import gzip
import json
import os
from itertools import islice
from pathlib import Path

import pytest

from eval import ubuntu_irc
from vigil.wire.events import CaseEvent, Event, Message, parse

THREADS = Path(os.environ.get("VIGIL_SHARED_DATA", ubuntu_irc.THREADS.parent.parent)) / "ubuntu-irc"
TRAIN = THREADS / "threads-train.jsonl.gz"

needs_data = pytest.mark.skipif(not TRAIN.exists(), reason=f"no {TRAIN} (set VIGIL_SHARED_DATA to ../shared/data)")


def first_threads(count: int) -> list[dict[str, object]]:
    with gzip.open(TRAIN, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in islice(handle, count)]


def parsed(events: list[dict[str, object]]) -> list[Message]:
    out = []
    for event in every_event(events):
        assert isinstance(event, Message)
        out.append(event)
    return out


def every_event(events: list[dict[str, object]]) -> list[Event]:
    return [parse(json.dumps(e).encode(), max_event_bytes=1 << 20, max_text_bytes=1 << 16) for e in events]


def thread(thread_id: str, lines: list[tuple[int, str, str]]) -> dict[str, object]:
    """A hand-made thread of log ``2010-03-01.train-a``: (line, HH:MM, speaker) each."""
    return {
        "thread_id": f"2010-03-01.train-a:{thread_id}",
        "date": "2010-03-01",
        "file": "2010-03-01.train-a",
        "speakers": sorted({speaker for _, _, speaker in lines}),
        "messages": [
            {"line": line, "time": clock, "speaker": speaker, "text": f"line {line}", "reply_to": None}
            for line, clock, speaker in lines
        ],
    }


@needs_data
def test_every_line_of_every_thread_becomes_a_v1_message_of_its_conversation():
    threads = first_threads(40)
    messages = parsed(ubuntu_irc.events(threads, ubuntu_irc.Selection()))
    assert len(messages) == sum(len(t["messages"]) for t in threads)  # type: ignore[arg-type]
    assert {m.conversation_id for m in messages} == {t["thread_id"] for t in threads}
    assert len({m.message_id for m in messages}) == len(messages)
    first = threads[0]["messages"][0]  # type: ignore[index]
    assert messages[0].author == first["speaker"] and messages[0].text == first["text"].strip()


@needs_data
def test_the_thread_opener_is_the_customer_bots_are_bots_and_the_other_speakers_analysts():
    threads = first_threads(400)
    messages = parsed(ubuntu_irc.events(threads, ubuntu_irc.Selection()))
    openers = {t["thread_id"]: t["messages"][0]["speaker"] for t in threads}  # type: ignore[index]
    for message in messages:
        if message.author in ("ubotu", "ubottu", "ubot3"):
            assert message.role == "bot"
        elif message.author == openers[message.conversation_id]:
            assert message.role == "customer"
        else:
            assert message.role == "analyst"
    assert {m.role for m in messages} == {"customer", "analyst", "bot"}


@needs_data
def test_events_come_in_time_order_and_a_thread_keeps_the_order_of_its_lines():
    threads = first_threads(400)
    messages = parsed(ubuntu_irc.events(threads, ubuntu_irc.Selection()))
    times = [m.sent_at for m in messages]
    assert times == sorted(times)
    for thread in threads:
        own = [m for m in messages if m.conversation_id == thread["thread_id"]]
        assert [m.metadata["line"] for m in own] == [m["line"] for m in thread["messages"]]  # type: ignore[index]
    assert messages[0].sent_at.isoformat() == f"{threads[0]['date']}T{threads[0]['messages'][0]['time']}:00+00:00"  # type: ignore[index]


def test_a_log_that_runs_past_midnight_goes_on_into_the_next_day():
    thread = {
        "thread_id": "2017-02-06.train-c:1353",
        "date": "2017-02-06",
        "file": "2017-02-06.train-c",
        "speakers": ["a", "b"],
        "messages": [
            {"line": 1353, "time": "23:58", "speaker": "a", "text": "anyone?", "reply_to": 1354},
            {"line": 1354, "time": "00:00", "speaker": "b", "text": "yes", "reply_to": None},
        ],
    }
    times = [m.sent_at.isoformat() for m in parsed(ubuntu_irc.events([thread], ubuntu_irc.Selection()))]
    assert times == ["2017-02-06T23:58:00+00:00", "2017-02-07T00:00:00+00:00"]


@needs_data
def test_a_selection_keeps_threads_of_enough_messages_and_speakers_within_its_dates():
    threads = first_threads(400)
    selection = ubuntu_irc.Selection(min_messages=3, min_speakers=2)
    kept = {m.conversation_id for m in parsed(ubuntu_irc.events(threads, selection))}
    expected = {
        t["thread_id"]
        for t in threads
        if len(t["messages"]) >= 3 and len({m["speaker"] for m in t["messages"]}) >= 2  # type: ignore[attr-defined]
    }
    assert kept == expected and 0 < len(kept) < len(threads)


def test_with_cases_each_thread_opens_before_its_first_line_and_closes_resolved_by_a_human_after_its_last():
    threads = [
        thread("10", [(10, "09:00", "asker"), (12, "09:01", "helper"), (15, "09:03", "asker")]),
        thread("11", [(11, "09:00", "other"), (13, "09:01", "helper2")]),
    ]
    events = every_event(ubuntu_irc.events(threads, ubuntu_irc.Selection(), cases=True))
    assert [e.id for e in events] == [
        "2010-03-01.train-a:10:opened",
        "2010-03-01.train-a:10",
        "2010-03-01.train-a:11:opened",
        "2010-03-01.train-a:11",
        "2010-03-01.train-a:12",
        "2010-03-01.train-a:13",
        "2010-03-01.train-a:11:closed",
        "2010-03-01.train-a:15",
        "2010-03-01.train-a:10:closed",
    ]
    cases = [e for e in events if isinstance(e, CaseEvent)]
    assert [(c.conversation_id, c.event) for c in cases if c.event == "closed"] == [
        ("2010-03-01.train-a:11", "closed"),
        ("2010-03-01.train-a:10", "closed"),
    ]
    for case in cases:
        own = [e for e in events if isinstance(e, Message) and e.conversation_id == case.conversation_id]
        if case.event == "opened":
            assert case.resolution is None and case.at == own[0].sent_at
        else:
            assert case.resolution is not None and case.resolution.resolved_by == "human"
            assert case.at == own[-1].sent_at
    assert [e.sent_at for e in events if isinstance(e, Message)] == sorted(
        e.sent_at for e in events if isinstance(e, Message)
    )


def test_cases_add_events_and_change_none_of_the_messages():
    threads = [thread("10", [(10, "09:00", "asker"), (12, "09:01", "helper")]), thread("20", [(20, "23:59", "x")])]
    plain = ubuntu_irc.events(threads, ubuntu_irc.Selection())
    with_cases = ubuntu_irc.events(threads, ubuntu_irc.Selection(), cases=True)
    assert [e for e in with_cases if e["type"] == "message"] == plain
    assert len(with_cases) == len(plain) + 2 * len(threads)


def test_the_command_writes_case_events_only_when_asked(tmp_path, capsys):
    source = tmp_path / "threads.jsonl"
    source.write_text(json.dumps(thread("10", [(10, "09:00", "asker"), (12, "09:01", "helper")])) + "\n")
    for flags, expected in (([], 2), (["--cases", "--tenant", "ubuntu"], 4)):
        out = tmp_path / "events.jsonl"
        assert ubuntu_irc.main(["--threads", str(source), "--out", str(out), *flags]) == 0
        written = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(written) == expected
        assert (
            f"1 threads of 1, {expected} events, 2010-03-01T09:00:00Z to 2010-03-01T09:01:00Z"
            in capsys.readouterr().err
        )
    assert {e["tenant"] for e in written} == {"ubuntu"}
