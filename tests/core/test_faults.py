"""Failpoints: a test names a point of vigil's life and what happens there; production, with none named, is
untouched."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from vigil.core import faults
from vigil.core.errors import ConnectorTimeout, SettingsError, StoreUnavailable


@pytest.fixture(autouse=True)
def disarmed() -> Iterator[None]:
    yield
    faults.configure("")


def test_nothing_happens_where_nothing_is_armed():
    faults.configure("")
    for _ in range(3):
        faults.fault("action.after_call")


def test_a_database_error_is_raised_on_the_visit_named_and_on_no_other():
    faults.configure("event.after_record=db_error@2")
    faults.fault("event.after_record")
    with pytest.raises(StoreUnavailable):
        faults.fault("event.after_record")
    faults.fault("event.after_record")
    faults.fault("action.after_call")


def test_a_connector_timeout_is_raised_where_armed():
    faults.configure("skill.after:actions=timeout, action.after_call=db_error")
    with pytest.raises(ConnectorTimeout):
        faults.fault("skill.after:actions")


@pytest.mark.parametrize(
    "spec",
    [
        "action.after_call",
        "=kill",
        "x=explode",
        "x=kill@0",
        "x=kill@two",
        "x=stall",
        "x=stall:0",
        "x=stall:a",
        "x=kill:3",
    ],
)
def test_a_spec_that_is_not_point_what_n_is_a_settings_error(spec: str):
    with pytest.raises(SettingsError, match="VIGIL_FAULTS"):
        faults.parse(spec)


def test_kill_ends_the_process_with_sigkill_there_and_then():
    code = "from vigil.core import faults; print('before', flush=True); faults.fault('p'); print('after', flush=True)"
    done = subprocess.run(
        [sys.executable, "-c", code], env={"VIGIL_FAULTS": "p=kill", "PATH": ""}, capture_output=True, text=True
    )
    assert done.returncode == -signal.SIGKILL
    assert done.stdout == "before\n"


def test_a_stall_freezes_the_whole_process_for_its_seconds_then_goes_on_where_it_stood():
    faults.configure("skill.after:answers=stall:0.3@2")
    started = time.monotonic()
    faults.fault("skill.after:answers")
    assert time.monotonic() - started < 0.1
    faults.fault("skill.after:answers")  # the second visit: blocked, nothing else of the process runs meanwhile
    assert time.monotonic() - started >= 0.3
