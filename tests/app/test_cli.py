"""The `vigil` command's own set-up, in process (the commands themselves run as subprocesses in tests/e2e)."""

from __future__ import annotations

import logging

import pytest

from tests.cases.test_store import event
from vigil.app.cli import MIGRATION_LOGGER, PARAMETER_LOGGERS, configure_logging
from vigil.cases.store import CaseStore
from vigil.cases.views import CaseViews


@pytest.mark.usefixtures("restored_logging")
async def test_debug_logging_never_prints_a_customers_text(
    store: CaseStore, views: CaseViews, caplog: pytest.LogCaptureFixture
):
    logging.getLogger().setLevel(logging.DEBUG)  # basicConfig does nothing where pytest set up handlers already
    configure_logging("DEBUG")
    logging.getLogger("sqlalchemy.engine").setLevel(logging.INFO)  # as an operator turning SQL logging on would
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
    assert await views.count_events() == {"conversations": 1, "messages": 1, "case_events": 0}
    statements = [r for r in caplog.records if r.name.startswith("sqlalchemy.engine")]
    assert statements, "SQL logging was on"
    assert secret not in caplog.text


@pytest.mark.usefixtures("restored_logging")
def test_a_quieter_level_stays_quieter_for_the_sql_libraries():
    logging.getLogger().setLevel(logging.WARNING)  # basicConfig does nothing where pytest set up handlers already
    configure_logging("WARNING")
    assert all(logging.getLogger(name).getEffectiveLevel() >= logging.WARNING for name in PARAMETER_LOGGERS)


# --- issue 9: log noise ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("restored_logging")
def test_bm25s_index_chatter_stays_out_of_an_info_log(caplog: pytest.LogCaptureFixture):
    from vigil.knowledge.lexical import LexicalIndex

    logging.getLogger().setLevel(logging.INFO)  # basicConfig does nothing where pytest set up handlers already
    configure_logging("INFO")
    caplog.handler.setLevel(logging.NOTSET)  # as basicConfig's handler: it shows whatever a logger lets through
    LexicalIndex(["a", "b"], ["my parcel is late", "reset a password"])  # bm25s logs "Building index from ..."
    assert [r for r in caplog.records if r.name.startswith("bm25s")] == []
    logging.getLogger("bm25s").warning("a real problem")
    assert [r.getMessage() for r in caplog.records if r.name == "bm25s"] == ["a real problem"]


@pytest.mark.usefixtures("restored_logging")
def test_each_http_request_to_a_chroma_server_stays_out_of_an_info_log(caplog: pytest.LogCaptureFixture):
    import httpx

    logging.getLogger().setLevel(logging.INFO)
    configure_logging("INFO")
    caplog.handler.setLevel(logging.NOTSET)
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json={"nanosecond heartbeat": 1}))
    with httpx.Client(transport=transport) as client:
        client.get("http://chroma.example:8000/api/v2/heartbeat")  # httpx logs "HTTP Request: GET ..." at INFO
    assert [r for r in caplog.records if r.name == "httpx"] == []
    logging.getLogger("httpx").warning("a real problem")
    assert [r.getMessage() for r in caplog.records if r.name == "httpx"] == ["a real problem"]


@pytest.mark.usefixtures("restored_logging")
def test_bm25s_chatter_shows_when_the_operator_asks_for_debug(caplog: pytest.LogCaptureFixture):
    from vigil.knowledge.lexical import LexicalIndex

    logging.getLogger().setLevel(logging.DEBUG)
    configure_logging("DEBUG")
    caplog.set_level(logging.DEBUG)
    LexicalIndex(["a"], ["my parcel is late"])
    assert any(r.name == "bm25s" and r.levelno == logging.DEBUG for r in caplog.records)


@pytest.mark.usefixtures("restored_logging")
def test_alembic_keeps_what_changed_and_drops_the_dialect_it_found(caplog: pytest.LogCaptureFixture):
    logging.getLogger().setLevel(logging.INFO)
    configure_logging("INFO")
    caplog.set_level(logging.INFO)
    migration = logging.getLogger(MIGRATION_LOGGER)
    migration.info("Context impl %s.", "SQLiteImpl")
    migration.info("Will assume non-transactional DDL.")
    migration.info("Running upgrade %s -> %s, %s", "0007", "0008", "conversation pages")
    assert [r.getMessage() for r in caplog.records] == ["Running upgrade 0007 -> 0008, conversation pages"]
