"""The timer-load benchmark's load and its lateness (bench/timers.py, issue 13): the shape of the 100,000 timers it
arms, where their moments fall, and how lateness is read from what vigil stored."""

from __future__ import annotations

import dataclasses
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from bench import timers as bench
from vigil.cases.timers import DUE, WARN
from vigil.progress import sla
from vigil.progress.reminders import COMMITMENT
from vigil.progress.settings import ProgressSettings

PLAN = dataclasses.replace(bench.Plan(), timers=3_000, conversations=900, in_window=300)
NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
WINDOW = NOW + timedelta(seconds=5)
BACKGROUND = NOW + timedelta(minutes=30)


def made(plan: bench.Plan = PLAN) -> list[tuple[bench.Shape, bench.Arm, bench.Commitment | None]]:
    out = []
    for shape in bench.shapes(plan):
        arm, commitment = bench.materialise(
            shape, background_from=BACKGROUND, window_start=WINDOW, window_s=plan.window_s, settings=ProgressSettings()
        )
        out.append((shape, arm, commitment))
    return out


def test_the_load_is_a_resolution_and_a_response_clock_per_conversation_and_commitments_for_the_rest() -> None:
    kinds = Counter(shape.kind for shape in bench.shapes(PLAN))
    assert kinds[sla.RESOLUTION] == 900
    assert kinds[sla.FIRST_RESPONSE] + kinds[sla.NEXT_RESPONSE] == 900
    assert kinds[COMMITMENT] == 3_000 - 1_800
    assert len({s.conversation_id for s in bench.shapes(PLAN)}) == 900


def test_the_load_is_reproducible_and_its_timer_ids_are_unique() -> None:
    first, again = made(), made()
    assert [a for _, a, _ in first] == [a for _, a, _ in again]
    assert len({a.timer_id for _, a, _ in first}) == PLAN.timers


def test_only_the_window_s_timers_fire_in_the_window_and_the_others_after_the_background_start() -> None:
    end = WINDOW + timedelta(seconds=PLAN.window_s)
    inside = 0
    for shape, arm, _ in made():
        first = arm.warn_at or arm.due_at
        if shape.in_window:
            assert WINDOW <= first <= end
            inside += 1
        else:
            assert first >= BACKGROUND
            assert arm.due_at <= BACKGROUND + timedelta(hours=25)
    assert inside == PLAN.in_window


def test_each_commitment_timer_times_a_stored_open_commitment_of_its_conversation() -> None:
    for shape, arm, commitment in made():
        if shape.kind != COMMITMENT:
            assert commitment is None
            continue
        assert commitment is not None
        assert arm.ref == commitment.commitment_id
        assert arm.timer_id == f"{commitment.conversation_id}/commitment/{commitment.commitment_id}"
        assert commitment.due_at == arm.due_at
        assert commitment.status == "open"


def test_warnings_come_as_long_before_the_due_time_as_vigil_would_give_them() -> None:
    for shape, arm, _ in made():
        if arm.warn_at is None:
            continue
        lead = (arm.due_at - arm.warn_at).total_seconds()
        if shape.kind == COMMITMENT:
            assert lead == ProgressSettings().remind_before_s
        else:
            target = getattr(ProgressSettings().targets(shape.tenant, shape.priority), f"{shape.kind}_s")
            assert lead == min(ProgressSettings().warn_before_s, target / 2)


def test_firings_are_the_warnings_and_due_times_inside_the_window_soonest_first() -> None:
    arm = bench.Arm(
        timer_id="c/sla/first_response",
        conversation_id="c",
        tenant="t",
        kind=sla.FIRST_RESPONSE,
        started_at=NOW,
        due_at=NOW + timedelta(seconds=120),
        warn_at=NOW + timedelta(seconds=60),
    )
    later = dataclasses.replace(
        arm, timer_id="c/sla/resolution", kind=sla.RESOLUTION, due_at=NOW + timedelta(hours=4), warn_at=None
    )
    found = bench.firings([later, arm], NOW, NOW + timedelta(seconds=180))
    assert [(f.timer_id, f.stage, f.at) for f in found] == [
        ("c/sla/first_response", WARN, NOW + timedelta(seconds=60)),
        ("c/sla/first_response", DUE, NOW + timedelta(seconds=120)),
    ]
    assert found[0].speaks and not found[1].speaks  # an SLA timer's due time counts a breach and says nothing


def test_lateness_is_the_stored_moment_minus_the_due_one_and_unfired_ones_are_counted_apart() -> None:
    at = NOW + timedelta(seconds=10)
    expected = [
        bench.Firing("a", "c", COMMITMENT, WARN, at),
        bench.Firing("a", "c", COMMITMENT, DUE, at + timedelta(seconds=60)),
        bench.Firing("b", "c", sla.RESOLUTION, WARN, at),
    ]
    stored = {("a", WARN): at + timedelta(seconds=0.25), ("a", DUE): None, ("b", WARN): at - timedelta(seconds=1)}
    late, missing = bench.lateness(expected, stored)
    assert late == [0.25, 0.0]
    assert missing == 1


def test_spread_gives_the_median_the_99th_percentile_and_the_worst() -> None:
    values = [float(n) for n in range(1, 101)]
    found = bench.spread(values)
    assert found["n"] == 100
    assert found["p50"] == pytest.approx(50.5)
    assert found["p99"] == pytest.approx(99.01)
    assert found["max"] == 100.0


def test_a_reminder_s_suggestion_id_is_the_one_vigil_makes_for_its_timer_and_stage() -> None:
    firing = bench.Firing("c/sla/resolution", "c", sla.RESOLUTION, WARN, NOW)
    assert firing.suggestion_id == str(
        uuid.uuid5(uuid.UUID("6f1d4a52-8c1e-4f0a-9d7b-3a5c2e9b7f10"), "c/@c/sla/resolution/warn")
    )
