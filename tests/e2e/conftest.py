"""Fixtures of the end-to-end tests: `vigil` subprocesses that are always cleaned up, and their logs on failure."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import VigilCli

LOG_TAIL_LINES = 80


@pytest.fixture
def vigil(tmp_path: Path) -> Iterator[VigilCli]:
    """Starts `vigil` commands for the test; whatever is still running at the end is stopped."""
    cli = VigilCli(tmp_path)
    try:
        yield cli
    finally:
        cli.kill_all()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """On a failure, show the tail of every vigil log of the test next to the assertion."""
    report: pytest.TestReport = yield
    cli = getattr(item, "funcargs", {}).get("vigil")
    if report.failed and isinstance(cli, VigilCli):
        for path in cli.logs:
            if path.exists():
                lines = path.read_text("utf-8", "replace").splitlines()[-LOG_TAIL_LINES:]
                report.sections.append((f"{path.name} (last {len(lines)} lines)", "\n".join(lines)))
    return report
