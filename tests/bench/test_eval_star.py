"""The STAR next-step evaluation's scoring, on a tiny hand-made fixture in STAR's layout (not the data)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from bench.eval_star import (
    Agreement,
    Baselines,
    Score,
    chart_edges,
    main,
    mined_edges,
    points,
    replay_labelled,
    to_dialogue,
)
from vigil.progress.procedures import PredictSettings, mine


def record(dialogue_id: int, start: int, answer: str, outcome: str, tasks: tuple[str, ...] = ("ride_book",)) -> dict:
    def pick(label: str, text: str) -> dict:
        return {"Agent": "Wizard", "Action": "pick_suggestion", "ActionLabel": label, "Text": text}

    return {
        "dialogue_id": dialogue_id,
        "start_unix": start,
        "tasks": list(tasks),
        "events": [
            {"Agent": "User", "Action": "utter", "Text": "I need a ride to the airport"},
            {"Agent": "Wizard", "Action": "request_suggestions", "Text": "your name?"},
            pick("ask_name", "Could I get your name, please?"),
            {"Agent": "User", "Action": "utter", "Text": "Sam"},
            {"Agent": "Wizard", "Action": "query", "APIName": "ride_book", "Constraints": []},
            {"Agent": "KnowledgeBase", "Action": "return_item", "Item": {}},
            pick("ride_ask_confirm_booking", "Shall I book it?"),
            {"Agent": "User", "Action": "utter", "Text": answer},
            pick(outcome, "Done." if outcome == "ride_confirm_booking" else "Alright."),
            {"Agent": "User", "Action": "complete"},
        ],
    }


def records() -> list[dict]:
    yes = [record(i, 1_589_000_000 + i, "yes please book it", "ride_confirm_booking") for i in range(6)]
    no = [record(10 + i, 1_589_000_100 + i, "no thanks, not now", "anything_else") for i in range(4)]
    return yes + no


def test_a_star_record_becomes_customer_and_analyst_turns_without_drafts_or_queries():
    d = to_dialogue(record(1, 1_589_000_000, "yes", "ride_confirm_booking"))
    assert [(t.role, t.step) for t in d.turns] == [
        ("customer", None),
        ("analyst", "ask_name"),
        ("customer", None),
        ("analyst", "ride_ask_confirm_booking"),
        ("customer", None),
        ("analyst", "ride_confirm_booking"),
    ]
    assert d.task == "ride_book"
    assert to_dialogue(record(2, 1, "yes", "x", tasks=("ride_book", "weather"))).task is None


def test_each_pick_is_predicted_from_the_turns_before_it():
    d = to_dialogue(record(1, 1_589_000_000, "yes", "ride_confirm_booking"))
    got = [(len(context), gold) for context, gold in points(d)]
    assert got == [(1, "ask_name"), (3, "ride_ask_confirm_booking"), (5, "ride_confirm_booking")]


def test_hits_count_at_one_and_at_three():
    score = Score()
    score.add("b", ["b", "a"])
    score.add("b", ["a", "c", "b"])
    score.add("b", ["a", "c", "d", "b"])
    score.add("b", [])
    assert (score.n, score.hit1, score.hit3) == (4, 1, 2)


def test_the_baseline_takes_the_step_that_most_often_followed_the_previous_one():
    procedures = mine((d.task, d.turns) for d in map(to_dialogue, records()))
    base = Baselines.of(procedures)
    context = to_dialogue(records()[-1]).turns[:5]
    assert base.first_order("ride_book", context)[0] == "ride_confirm_booking"
    assert base.overall[:2] == ["ask_name", "ride_ask_confirm_booking"]


def test_vigil_beats_the_baseline_where_the_customer_decides_the_branch():
    dialogues = [to_dialogue(r) for r in records()]
    procedures = mine((d.task, d.turns) for d in dialogues)
    scores = replay_labelled(procedures, dialogues, PredictSettings())
    assert scores["vigil, category given"].hit1 == 30
    assert scores["baseline: most frequent after the previous step"].hit1 == 26


def test_a_flowchart_is_contracted_through_its_queries_and_decisions():
    graph = {
        "ask_name": "ask_flight",
        "ask_flight": "query_check",
        "available": "flight_available",
        "unavailable": "flight_unavailable",
        "yes": "query_book",
        "query_success": "booked",
        "query_failure": "failed",
        "booked": "anything_else",
    }
    edges, decisions, nodes = chart_edges(graph)
    assert ("ask_name", "ask_flight") in edges
    assert ("ask_flight", "flight_available") in edges
    assert ("ask_flight", "flight_unavailable") in edges
    assert ("booked", "anything_else") in edges
    assert ("ask_flight", "booked") in edges  # query_check's outcome, as charts draw for a check-and-book task
    assert decisions >= {"booked", "failed"}  # after the customer's undrawn "yes"
    assert "query_check" not in nodes


def test_graph_agreement_counts_mined_edges_the_chart_draws():
    chart = chart_edges({"a": "b", "b": "query", "query": "c"})
    agreement = Agreement()
    agreement.add({("a", "b"), ("b", "c"), ("c", "bye")}, chart)
    assert (agreement.right, agreement.mined, agreement.found, agreement.chart) == (2, 3, 2, 2)
    assert (agreement.right_drawn, agreement.mined_drawn) == (2, 2)


def test_only_transitions_with_support_are_compared():
    procedures = mine((d.task, d.turns) for d in map(to_dialogue, records()))
    edges = mined_edges(procedures["ride_book"])
    assert ("ride_ask_confirm_booking", "ride_confirm_booking") in edges  # 6 cases
    assert ("ask_name", "ride_ask_confirm_booking") in edges
    assert ("ride_ask_confirm_booking", "anything_else") not in edges  # 4 cases, under EDGE_MIN


def test_another_directory_of_the_same_layout_is_replayed(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    with gzip.open(tmp_path / "dialogues-dev.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in records())
    chart = tmp_path / "tasks" / "ride_book"
    chart.mkdir(parents=True)
    (chart / "ride_book.json").write_text(json.dumps({"graph": {"ask_name": "ride_ask_confirm_booking"}}))
    main(["--data", str(tmp_path), "--history", str(tmp_path), "--cut", "2020-05-09T04:54:00"])
    out = capsys.readouterr().out
    assert "mined 6 single-task dialogues before 2020-05-09 04:54; replaying 4" in out
    assert (
        "vigil, category given                              hit@1 0.667  hit@3 0.667  (n=12)" in out
    )  # "no" was never mined
    assert "ride_book                precision 0.50 (1/2)" in out
