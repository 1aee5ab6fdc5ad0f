"""The CPU-per-skill profile (bench/skills_cpu.py, issue 24): its events and how it splits an event's CPU."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bench import skills_cpu
from vigil.wire.events import CaseEvent, Message


def test_the_demo_mix_is_parsed_as_ingest_parses_it_on_the_day_given():
    day = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
    events = skills_cpu.demo_events(300, "t", day)
    assert len(events) == 300
    assert {type(e) for e in events} == {Message, CaseEvent}
    assert {e.role for e in events if isinstance(e, Message)} >= {"customer", "analyst"}
    times = [e.occurred_at for e in events]
    assert times == sorted(times) and times[0] >= day


def test_keepers_are_taken_out_of_recording_and_the_rest_is_what_no_step_took():
    figures = {
        "events": 100,
        "sequential": {"cpu_s": 1.0, "wall_s": 2.0},
        "steps": {
            "cpu_s": {"recording": 0.3, "keeper:progress": 0.1, "skill:answers": 0.4},
            "calls": {"recording": 100, "keeper:progress": 100, "skill:answers": 40},
        },
    }
    rows = {step: (per_event, calls, per_call) for step, per_event, calls, per_call in skills_cpu.breakdown(figures)}
    assert rows["recording"][0] == pytest.approx(2.0)  # 0.3 s less the keeper's 0.1 s, over 100 events
    assert rows["keeper:progress"][0] == pytest.approx(1.0)
    assert rows["skill:answers"][0] == pytest.approx(4.0) and rows["skill:answers"][2] == pytest.approx(10.0)
    rest = next(v for k, v in rows.items() if k.startswith("the rest"))
    assert rest[0] == pytest.approx(2.0)  # 1.0 s in all, less the 0.8 s the steps took
