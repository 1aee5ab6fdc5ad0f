"""What grows: a report of the allocation sites that grew since the last one, when allocations are traced."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from collections.abc import Iterator

import pytest

from vigil.core.memory import GrowthReport

_kept: list[bytes] = []


def _grow() -> None:
    _kept.append(b"x" * (4 << 20))  # this line is the site that grows


@pytest.fixture
def tracing() -> Iterator[None]:
    tracemalloc.start(4)
    yield
    tracemalloc.stop()
    _kept.clear()


def test_without_tracing_it_says_how_to_turn_it_on():
    assert "PYTHONTRACEMALLOC" in GrowthReport().report()


def test_the_second_report_names_the_site_that_grew_between_the_two(tracing: None):
    report = GrowthReport()
    report.report()
    _grow()
    lines = report.report().splitlines()
    assert "since the last report" in lines[0]
    site = f"test_memory.py:{_grow.__code__.co_firstlineno + 1}"
    assert site in lines[1] and lines[1].lstrip().startswith("+4.00 MiB")


def test_a_vigil_process_started_with_tracing_logs_the_report_on_sigusr2(tmp_path):
    code = (
        "import asyncio, logging, os, signal\n"
        "from vigil.app.cli import _until_signalled\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "async def work(stop):\n"
        "    os.kill(os.getpid(), signal.SIGUSR2)\n"  # as an operator does: kill -USR2 <pid>
        "    await asyncio.sleep(0.5)\n"
        "asyncio.run(_until_signalled(work))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONTRACEMALLOC": "4", "PATH": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "traced allocations:" in done.stderr and "the top since start" in done.stderr
