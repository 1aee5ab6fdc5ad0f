"""eval/irc_score.py: each question a helper answered is scored on what vigil suggested before the answer."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

from eval import irc_score
from eval.irc_match import Matcher
from eval.irc_score import questions, read_replay, score, wilson


def message(
    log: str, line: int, role: str, text: str, at: str, reply_to: int | None = None, thread: int | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"source": "ubuntu-irc", "file": log, "line": line}
    if reply_to is not None:
        metadata["reply_to"] = reply_to
    return {
        "type": "message",
        "schema_version": 1,
        "message_id": f"{log}:{line}",
        "conversation_id": f"{log}:{thread if thread is not None else line}",
        "sent_at": at,
        "role": role,
        "author": role,
        "text": text,
        "metadata": metadata,
    }


def suggestion(sid: str, conversation: str, in_reply_to: str, text: str, kind: str = "answer") -> dict[str, Any]:
    return {
        "type": "suggestion",
        "schema_version": 1,
        "suggestion_id": sid,
        "conversation_id": conversation,
        "tenant": "default",
        "in_reply_to": in_reply_to,
        "created_at": "2010-03-01T09:00:00Z",
        "kind": kind,
        "text": text,
        "confidence": 0.8,
        "sources": [{"kind": "case", "id": "c1"}],
        "latency_ms": 0.0,
    }


OLD, NEW = "2009-06-01.train-a", "2010-03-01.train-a"
A, B, C = f"{NEW}:10", f"{NEW}:20", f"{OLD}:5"


def replay_file(tmp_path: Path) -> Path:
    """Three threads: A (two questions, one answered by a helper, one by a bot), B (a question nobody answered,
    then a question answered), C (older: a question answered). Case events are skipped by the scorer."""
    events = [
        {
            "type": "case",
            "schema_version": 1,
            "event_id": f"{C}:opened",
            "conversation_id": C,
            "at": "2009-06-01T08:00:00Z",
            "event": "opened",
        },
        message(OLD, 5, "customer", "how do i list my usb devices?", "2009-06-01T08:00:00Z", reply_to=6),
        message(OLD, 6, "analyst", "asker: lsusb", "2009-06-01T08:01:00Z", thread=5),
        message(NEW, 10, "customer", "how do I check free disk space?", "2010-03-01T09:00:00Z", reply_to=12),
        message(NEW, 11, "customer", "in a terminal I mean", "2010-03-01T09:00:00Z", thread=10),
        message(NEW, 12, "analyst", "asker: df -h", "2010-03-01T09:00:00Z", thread=10),
        message(NEW, 13, "customer", "what is the factoid for X?", "2010-03-01T09:01:00Z", reply_to=14, thread=10),
        message(NEW, 14, "bot", "X is the window system", "2010-03-01T09:01:00Z", thread=10),
        message(
            NEW,
            15,
            "customer",
            "thanks, and how do i see my kernel version?",
            "2010-03-01T09:02:00Z",
            reply_to=16,
            thread=10,
        ),
        message(NEW, 16, "analyst", "asker: uname -r", "2010-03-01T09:03:00Z", thread=10),
        message(NEW, 20, "customer", "anyone here?", "2010-03-02T10:00:00Z", thread=20),
        message(
            NEW, 21, "customer", "how do I install vlc from a terminal?", "2010-03-02T10:01:00Z", reply_to=22, thread=20
        ),
        message(NEW, 22, "analyst", "you: sudo apt-get install vlc", "2010-03-02T10:02:00Z", thread=20),
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def suggestions() -> list[dict[str, Any]]:
    return [
        suggestion("s1", A, f"{NEW}:11", "df -h shows the free space of each disk"),  # window of 10
        suggestion("s2", A, f"{NEW}:12", "Try uname -r."),  # replies to the helper's line: after 10's answer, before 15
        suggestion("s3", A, f"{NEW}:15", "Restart the Hub and wait for a solid white light."),  # window of 15: no match
        suggestion("s4", B, f"{NEW}:20", "Ask your question and someone will help."),  # 20 was not answered: unjudged
        suggestion("s5", A, f"{NEW}:10", "df -h", kind="next_step"),  # not an answer: ignored
        suggestion("s6", C, f"{OLD}:5", "lsusb lists them"),  # the older period
    ]


def test_a_question_is_a_customer_line_a_helper_answered_and_its_window_ends_at_the_answer(tmp_path):
    found = questions(read_replay(replay_file(tmp_path)), suggestions())
    assert [(q.asked.message_id, q.answer.message_id) for q in found] == [
        (f"{OLD}:5", f"{OLD}:6"),
        (f"{NEW}:10", f"{NEW}:12"),
        (f"{NEW}:15", f"{NEW}:16"),
        (f"{NEW}:21", f"{NEW}:22"),
    ]
    windows = {q.asked.message_id: [s["suggestion_id"] for s in q.suggestions] for q in found}
    assert windows == {f"{OLD}:5": ["s6"], f"{NEW}:10": ["s1"], f"{NEW}:15": ["s3"], f"{NEW}:21": []}


def test_the_test_period_counts_hits_silences_and_precision(tmp_path, embedder):
    result = score(read_replay(replay_file(tmp_path)), suggestions(), Matcher(embedder), since=date(2010, 1, 1))
    total = result["total"]
    assert (total["threads"], total["questions"], total["suggestions"]) == (2, 3, 4)
    assert (total["spoke"], total["hits"], total["suggestions_judged"], total["suggestions_matched"]) == (2, 1, 2, 1)
    assert total["hit_rate"] == round(1 / 3, 4) and total["silence_rate"] == round(1 / 3, 4)
    assert total["precision"] == 0.5 and total["hit_rate_when_spoken"] == 0.5
    assert [m["suggestion_id"] for m in result["matches"]] == ["s1"]


def test_over_time_the_period_is_cut_into_buckets_of_threads_in_date_order(tmp_path, embedder):
    result = score(read_replay(replay_file(tmp_path)), suggestions(), Matcher(embedder), bucket=2)
    buckets = result["over_time"]
    assert [(b["threads"], b["first_day"], b["last_day"], b["questions"], b["hits"]) for b in buckets] == [
        (2, "2009-06-01", "2010-03-01", 3, 2),
        (1, "2010-03-02", "2010-03-02", 1, 0),
    ]
    assert result["total"]["hits"] == sum(b["hits"] for b in buckets)


def test_the_command_prints_the_table_and_writes_the_figures(tmp_path, embedder, capsys):
    events = replay_file(tmp_path)
    said = tmp_path / "suggestions.jsonl"
    said.write_text("".join(json.dumps(s) + "\n" for s in suggestions()))
    out = tmp_path / "score.json"
    irc_score.run(
        [str(events), str(said), "--since", "2010-01-01", "--json", str(out), "--show", "1"], embedder=embedder
    )
    printed = capsys.readouterr().out
    assert "| all: 2 | 2010-03-01 to 2010-03-02 | 3 | 4 | 2 | 1 | 33.3% (" in printed
    assert "vigil (case:c1): df -h shows" in printed
    assert json.loads(out.read_text())["total"]["hits"] == 1


def test_a_rate_s_interval_holds_it_and_stays_within_0_and_1():
    low, high = wilson(0, 50)
    assert low == 0.0 and 0.0 < high < 0.1
    low, high = wilson(5, 10)
    assert low < 0.5 < high
    assert wilson(0, 0) == (0.0, 0.0)
