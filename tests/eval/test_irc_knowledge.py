"""eval/irc_knowledge.py: older threads as whole documents that vigil imports, the yardstick for the miner."""

from __future__ import annotations

import json

from eval import irc_knowledge
from vigil.knowledge.documents import read


def thread(thread_id: str, date: str, lines: list[tuple[str, str]]) -> dict[str, object]:
    return {
        "thread_id": f"{date}.train-a:{thread_id}",
        "date": date,
        "file": f"{date}.train-a",
        "messages": [
            {"line": n, "time": "10:00", "speaker": speaker, "text": text, "reply_to": None}
            for n, (speaker, text) in enumerate(lines)
        ],
    }


def test_a_thread_is_its_question_then_what_its_helpers_said_and_vigil_imports_it(tmp_path):
    threads = tmp_path / "threads.jsonl"
    answered = thread(
        "1",
        "2008-05-01",
        [
            ("asker", " how do i see free disk space? "),
            ("helper", "asker: df -h"),
            ("ubotu", "a factoid"),
            ("asker", "thanks"),
        ],
    )
    alone = thread("2", "2008-05-01", [("asker", "anyone?"), ("ubottu", "please be patient")])
    newer = thread("3", "2011-01-01", [("asker", "hi"), ("helper", "hello")])
    threads.write_text("".join(json.dumps(t) + "\n" for t in (answered, alone, newer)))
    out = tmp_path / "kb.jsonl"
    assert irc_knowledge.main(["--threads", str(threads), "--until", "2009-12-31", "--out", str(out)]) == 0
    [entry] = read(out)
    assert entry.id == "irc-2008-05-01.train-a-1" and entry.kind == "document"
    assert entry.title == "how do i see free disk space?"
    assert entry.body == "how do i see free disk space?\ndf -h"
