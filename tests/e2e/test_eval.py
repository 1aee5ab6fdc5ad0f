"""`vigil eval replay` as a subprocess: the same file replayed twice from empty gives the same bytes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Each run loads the embedding model and embeds the help centre (~15-40 s of CPU apiece on a loaded machine).
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

VIGIL = Path(sys.executable).parent / "vigil"
ROOT = Path(__file__).resolve().parent.parent.parent
DEMO = ROOT / "knowledge" / "demo" / "conversations.jsonl"


def eval_replay(tmp_path: Path, events: Path, out: Path, *, hash_seed: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "VIGIL_DATA_DIR": str(tmp_path / "data"),
        "VIGIL_LOG_LEVEL": "WARNING",
        "VIGIL_KNOWLEDGE__PATHS": json.dumps([str(ROOT / "knowledge" / "articles"), str(ROOT / "knowledge" / "faqs")]),
        # Each run orders sets and dicts of strings its own way: the output must not depend on it.
        "PYTHONHASHSEED": hash_seed,
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
    }
    return subprocess.run(
        [str(VIGIL), "eval", "replay", str(events), "--out", str(out), "--fresh"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_replaying_a_file_twice_from_empty_writes_identical_suggestions_and_names_its_bad_line(tmp_path: Path):
    lines = DEMO.read_text("utf-8").splitlines()[:60]
    events = tmp_path / "events.jsonl"
    events.write_text("\n".join([*lines[:30], "not an event", *lines[30:]]) + "\n", "utf-8")

    first = eval_replay(tmp_path, events, tmp_path / "first.jsonl", hash_seed="1")
    second = eval_replay(tmp_path, events, tmp_path / "second.jsonl", hash_seed="2")

    for done in (first, second):
        assert done.returncode == 1, done.stderr
        assert f"{events}:31: not replayed, invalid_json:" in done.stderr
        assert "events: 60 (" in done.stderr and ", 0 already stored, 1 bad lines" in done.stderr
    said = (tmp_path / "first.jsonl").read_bytes()
    assert said.count(b"\n") >= 2
    assert said == (tmp_path / "second.jsonl").read_bytes()
    suggestions = [json.loads(line) for line in said.splitlines()]
    kinds = [s["kind"] for s in suggestions]
    assert "answer" in kinds and set(kinds) <= {"answer", "follow_up", "escalation", "handover", "next_step"}
    assert f"suggestions: {len(suggestions)} (answer {kinds.count('answer')}" in first.stderr
