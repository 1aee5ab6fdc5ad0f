"""vigil under failure: killed mid-stream, a frozen broker, a database that is not there."""

from __future__ import annotations

import asyncio
import signal
import time

import pytest

from tests.conftest import Topics, create_topics, frozen
from tests.e2e.harness import Database, VigilCli, chat, eventually, ready
from tests.kafka_client import produce
from vigil.dev.broker import EmbeddedBroker, free_port

pytestmark = pytest.mark.e2e

SESSION_TIMEOUT_S = 6  # what the harness gives vigil


async def test_killed_mid_stream_then_restarted_stores_everything_exactly_once(
    vigil: VigilCli, kafka: EmbeddedBroker, topics: Topics, db_url: str
) -> None:
    records, expected = chat(conversations=30, messages=3000, prefix="kill")
    await create_topics(kafka.bootstrap, topics)
    produce(kafka.bootstrap, topics.input, records)
    db = Database(db_url)

    first = vigil.daemon(kafka.bootstrap, topics, db_url)
    await db.reach("message", 1000, first, at_least=True)
    first.send(signal.SIGKILL)
    assert first.wait(5) == -signal.SIGKILL
    assert db.count("message") < len(records), "killed after everything was stored: the test proved nothing"

    second = vigil.daemon(kafka.bootstrap, topics, db_url)
    await db.reach("message", len(records), second, timeout_s=60)
    second.stop()
    db.assert_stored_once(expected)


async def test_frozen_broker_makes_vigil_unready_then_it_resumes_by_itself(
    vigil: VigilCli, own_kafka: EmbeddedBroker, topics: Topics, sqlite_url: str
) -> None:
    backlog, expected = chat(conversations=30, messages=3000, prefix="frozen")
    later, expected_later = chat(conversations=5, messages=100, prefix="thawed")
    await create_topics(own_kafka.bootstrap, topics)
    produce(own_kafka.bootstrap, topics.input, backlog)
    db = Database(sqlite_url)

    daemon = vigil.daemon(own_kafka.bootstrap, topics, sqlite_url)
    await ready(daemon)
    await db.reach("message", 300, daemon, at_least=True)
    with frozen(own_kafka):
        frozen_at = time.monotonic()
        # How soon vigil notices is measured by bench.lifecycle; here it must only notice.
        await eventually("/readyz 503", lambda: daemon.status("/readyz") == 503, timeout_s=8, process=daemon)
        body = daemon.get("/readyz").json()
        assert body["status"] == "unavailable"
        assert set(body["problems"]) == {"broker"}, body
        assert daemon.metric("vigil_dependency_up", dependency="broker") == 0
        assert daemon.metric("vigil_dependency_up", dependency="database") == 1
        assert daemon.status("/healthz") == 200
        # Frozen for longer than the group session: vigil never claims to be ready while the broker is silent.
        while time.monotonic() - frozen_at < SESSION_TIMEOUT_S + 1:
            assert daemon.status("/readyz") == 503
            await asyncio.sleep(0.2)

    await eventually("/readyz 200 again", lambda: daemon.status("/readyz") == 200, timeout_s=15, process=daemon)
    await db.reach("message", len(backlog), daemon, timeout_s=60)
    produce(own_kafka.bootstrap, topics.input, later)
    await db.reach("message", len(backlog) + len(later), daemon)
    daemon.stop(clean=False)  # a fetch that failed while the broker was frozen is logged with its traceback
    db.assert_stored_once(expected | expected_later)


@pytest.mark.parametrize("missing", ["database", "broker"])
async def test_unreachable_dependency_at_start_keeps_vigil_up_but_unready(
    vigil: VigilCli, kafka: EmbeddedBroker, topics: Topics, sqlite_url: str, missing: str
) -> None:
    nowhere = f"127.0.0.1:{free_port()}"  # nothing listens there
    bootstrap, db_url = kafka.bootstrap, sqlite_url
    if missing == "database":
        db_url = f"postgresql+asyncpg://postgres@{nowhere}/vigil"
    else:
        bootstrap = nowhere
    daemon = vigil.daemon(bootstrap, topics, db_url, VIGIL_DATABASE__TIMEOUT_S="1")
    await eventually("/healthz 200", lambda: daemon.status("/healthz") == 200, timeout_s=20, process=daemon)

    def problems() -> dict[str, str]:
        response = daemon.get("/readyz")
        assert response.status_code == 503, response.text
        return dict(response.json()["problems"])

    # Past "not checked yet": the check itself found the dependency missing.
    await eventually(
        f"/readyz naming the {missing}",
        lambda: "not checked yet" not in problems().get(missing, "not checked yet"),
        timeout_s=10,
        process=daemon,
    )
    # Only the missing dependency is named, beside the pipeline that cannot start without it and the consumer group
    # it has not joined yet.
    assert set(problems()) == {missing, "pipeline", "consumer group"}, problems()
    # vigil keeps trying, and stays up and unready meanwhile.
    await eventually(
        "start-up retried", lambda: daemon.metric("vigil_retries_total", dependency=missing) >= 2, 10, daemon
    )
    assert daemon.status("/readyz") == 503
    assert daemon.status("/healthz") == 200
    daemon.stop(signal.SIGTERM)  # it still stops cleanly: start-up retries give way to the signal
