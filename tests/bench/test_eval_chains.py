"""bench.eval_chains: the team's chains file has the shape its README gives, and the guard meets issue 14's goal on
the test split (every dangerous chain caught, at most 5% of harmless sequences blocked)."""

from __future__ import annotations

from bench.eval_chains import ACTIONS, RULES, evaluate, load, records, split_of, when
from vigil.actions.risk import Guard


def test_the_file_has_enough_of_each_kind_and_both_splits_have_some():
    rows = load("all")
    assert len({row["id"] for row in rows}) == len(rows)
    assert sum(row["dangerous"] for row in rows) >= 40 and sum(not row["dangerous"] for row in rows) >= 150
    for split in ("dev", "test"):
        part = [row for row in rows if split_of(row["id"]) == split]
        assert sum(row["dangerous"] for row in part) >= 15 and sum(not row["dangerous"] for row in part) >= 60


def test_every_step_is_a_catalog_action_in_time_order_with_a_known_status():
    for row in load("all"):
        steps = records(row)
        assert steps and all(step.name in ACTIONS for step in steps), row["id"]
        assert [s.at for s in steps] == sorted(s.at for s in steps), row["id"]
        assert {s.status for s in steps} <= {
            "suggested",
            "approved",
            "executed",
            "rejected",
            "failed",
            "expired",
            "blocked",
        }


def test_times_are_days_and_clock_time_after_2_march_2026():
    assert when("d3 14:05").isoformat() == "2026-03-05T14:05:00+00:00"


def test_the_guard_catches_every_dangerous_chain_and_blocks_at_most_5_percent_of_harmless_ones_on_test():
    caught, dangerous, blocked, harmless = evaluate(Guard.from_file(RULES, ACTIONS), load("test"))
    assert caught == dangerous
    assert blocked <= 0.05 * harmless
