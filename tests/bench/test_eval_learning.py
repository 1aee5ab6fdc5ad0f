"""The learning curve's replayed history: the company's own events, with its new phrasings asked at the end of each
week, each in a conversation of its own, in time order (the replay's clock never goes back)."""

from __future__ import annotations

import itertools
import json
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bench import eval_learning
from bench.eval_learning import Week, curve, history, table
from bench.eval_mining import rows


def test_the_phrasings_are_asked_at_the_end_of_every_week_of_the_history_in_conversations_of_their_own():
    events, probes = history("kestrel")
    asked = [e for e in events if e["conversation_id"].startswith("probe-")]
    cases = [e for e in events if not e["conversation_id"].startswith("probe-")]
    assert len(probes) == 7 and all(b - a == timedelta(days=7) for a, b in itertools.pairwise(probes))
    assert len(asked) == 7 * 61 and len({e["conversation_id"] for e in asked}) == len(asked)
    assert max(e.get("sent_at") or e["at"] for e in cases) < asked[-1]["sent_at"]
    moments = [e.get("sent_at") or e["at"] for e in events]
    assert moments == sorted(moments)


def test_the_table_sets_the_miner_on_beside_off_week_by_week():
    _, probes = history("kestrel")
    on = [Week(1, probes[0], 50, 25, 5, 1, 10, 2)]
    off = [Week(1, probes[0], 50, 0, 0, 0, 10, 0)]
    assert "| 1 (13 Sep) | 25/50 (0.50) | 5 (1) | 2/10 | 0/50 (0.00) |" in table("kestrel", on, off)


def test_an_answer_is_right_when_its_first_source_holds_mostly_cases_of_the_phrasing_s_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # The replay stands in for `vigil eval replay`: two mined entries, and answers to three probes of week 1.
    labels = {r["conversation_id"]: r for r in rows("kestrel", "labels")}
    phrasings = rows("kestrel", "phrasings")
    asked = next(p for p in phrasings if p["problem"])
    of_it = [c for c, lab in labels.items() if lab["problem"] == asked["problem"]]
    other = next(c for c, lab in labels.items() if lab["problem"] not in (None, asked["problem"]))
    nothing = next(p for p in phrasings if p["problem"] is None)
    elsewhere = next(p for p in phrasings if p["problem"] and p["problem"] != asked["problem"])
    database = tmp_path / "vigil.db"
    with sqlite3.connect(database) as conn:
        conn.execute("CREATE TABLE knowledge_entry (id TEXT, provenance TEXT)")
        cases = {"right": [*of_it[:2], other], "wrong": [other]}
        for entry, ids in cases.items():
            conn.execute(
                "INSERT INTO knowledge_entry VALUES (?, ?)",
                (entry, json.dumps({"cases": [{"conversation_id": c} for c in ids]})),
            )

    def answer(probe: dict[str, Any], entry: str, confidence: float) -> dict[str, Any]:
        cid = f"probe-w1-{probe['id']}"
        return {"kind": "answer", "conversation_id": cid, "sources": [{"id": entry}], "confidence": confidence}

    said = [answer(asked, "right", 0.6), answer(elsewhere, "wrong", 0.9), answer(nothing, "wrong", 0.7)]
    monkeypatch.setattr(eval_learning, "replay", lambda events, folder, *, miner: (said, database))
    week = curve("kestrel", tmp_path, miner=True)[0]
    assert (week.right, week.wrong, week.wrong_confident, week.unanswerable_answered) == (1, 1, 1, 1)
    assert week.answerable == sum(p["problem"] is not None for p in phrasings)
