"""The `vigil` command's own set-up, in process (the commands themselves run as subprocesses in tests/e2e)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from tests.test_store import event
from vigil.cli import PARAMETER_LOGGERS, configure_logging
from vigil.store import CaseStore


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """Put back the levels ``configure_logging`` sets, so other tests log as before."""
    loggers = [logging.getLogger(name) for name in (*PARAMETER_LOGGERS, "alembic.runtime.plugins", "")]
    levels = [logger.level for logger in loggers]
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


@pytest.mark.usefixtures("restored_logging")
async def test_debug_logging_never_prints_a_customers_text(store: CaseStore, caplog: pytest.LogCaptureFixture):
    configure_logging("DEBUG")
    caplog.set_level(logging.DEBUG)
    secret = "my card is 4111 1111 1111 1111"
    await store.record(
        event(
            type="message",
            message_id="m-1",
            conversation_id="debug-1",
            role="customer",
            text=secret,
            sent_at="2026-11-02T09:00:00Z",
        )
    )
    assert await store.count_events() == {"conversations": 1, "messages": 1, "case_events": 0}
    assert secret not in caplog.text


@pytest.mark.usefixtures("restored_logging")
def test_a_quieter_level_stays_quieter_for_the_sql_libraries():
    logging.getLogger().setLevel(logging.WARNING)  # basicConfig does nothing where pytest set up handlers already
    configure_logging("WARNING")
    assert all(logging.getLogger(name).getEffectiveLevel() >= logging.WARNING for name in PARAMETER_LOGGERS)
