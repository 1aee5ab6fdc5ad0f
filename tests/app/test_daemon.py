"""The daemon in-process against a real broker: events in, stored, suggestions out on Kafka, clean shutdown."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
from collections.abc import Sequence

import httpx
import pytest

from tests.conftest import Topics, create_topics, make_settings, wait_for
from tests.kafka_client import produce, read_topic
from tests.sse import sse_events
from vigil.app.compose import compose
from vigil.app.daemon import Daemon, running
from vigil.core.clock import SystemClock
from vigil.core.errors import SettingsError, StartupError
from vigil.core.lifecycle import Phase
from vigil.dev.broker import EmbeddedBroker, free_port
from vigil.flow.case import CaseState
from vigil.flow.skills import Proposal
from vigil.knowledge.store import KnowledgeStore
from vigil.transport.kafka import KafkaSource
from vigil.wire.events import Event, Message, SuggestionKind


class Acknowledge:
    """Proposes a reply to every customer question (a stand-in capability for wiring tests)."""

    name = "acknowledge"
    kind: SuggestionKind = "answer"

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s

    async def propose(self, event: Event, case: CaseState | None) -> Sequence[Proposal]:
        await asyncio.sleep(self.delay_s)
        if isinstance(event, Message) and event.role == "customer" and event.text.endswith("?"):
            return (Proposal(kind="answer", text=f"Answering: {event.text}", confidence=0.9),)
        return ()


def message(n: int, conversation: str, text: str) -> tuple[bytes, bytes]:
    value = {
        "type": "message",
        "schema_version": 1,
        "message_id": f"{conversation}-{n}",
        "conversation_id": conversation,
        "tenant": "brightwave",
        "sent_at": f"2026-11-02T09:00:{n:02d}Z",
        "role": "customer",
        "text": text,
    }
    return conversation.encode(), json.dumps(value).encode()


async def test_events_are_stored_and_suggestions_published(kafka: EmbeddedBroker, topics: Topics, tmp_path):
    await create_topics(kafka.bootstrap, topics)
    settings = make_settings(
        tmp_path=tmp_path, db_url=None, bootstrap=kafka.bootstrap, topics=topics, answers={"enabled": False}
    )
    daemon = Daemon(settings, skills=[Acknowledge(delay_s=0.05)])
    produce(
        kafka.bootstrap,
        topics.input,
        [message(1, "c-1", "hi"), message(2, "c-1", "how do I set up an eSIM?"), message(1, "c-2", "thanks")],
    )
    async with running(daemon):
        await wait_for(lambda: daemon.health.ready, 20)  # ready: migrated, consumer started
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{daemon.http_port}") as client:
            assert (await client.get("/readyz")).status_code == 200

            async def both_stored() -> bool:
                answer = await client.get("/api/conversations/c-1")
                return answer.status_code == 200 and len(answer.json()["messages"]) == 2

            await wait_for(both_stored, 20)
            body = (await client.get("/api/conversations/c-1")).json()
            assert [m["text"] for m in body["messages"]] == ["how do I set up an eSIM?", "hi"]  # newest first
    (out,) = read_topic(kafka.bootstrap, topics.suggestions, expect=1)
    suggestion = json.loads(out.value or b"")
    assert out.key == b"c-1"
    assert (suggestion["type"], suggestion["kind"], suggestion["in_reply_to"]) == ("suggestion", "answer", "c-1-2")
    assert suggestion["tenant"] == "brightwave"
    assert suggestion["latency_ms"] >= 50  # from the record's arrival: it includes the skill's 50 ms
    assert (tmp_path / "data" / "vigil.db").exists()  # SQLite in the data dir by default


async def test_the_daemon_refuses_to_start_without_a_broker(tmp_path):
    with pytest.raises(SettingsError) as caught:
        Daemon(make_settings(tmp_path=tmp_path))
    assert caught.value.setting == "VIGIL_KAFKA__BOOTSTRAP_SERVERS"


async def test_a_taken_http_port_stops_start_up(kafka: EmbeddedBroker, topics: Topics, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = make_settings(
            tmp_path=tmp_path, bootstrap=kafka.bootstrap, topics=topics, http={"host": "127.0.0.1", "port": port}
        )
        with pytest.raises(StartupError):
            await asyncio.wait_for(Daemon(settings).run(asyncio.Event()), 10)


async def test_panels_watching_live_do_not_hold_up_shutdown(kafka: EmbeddedBroker, topics: Topics, tmp_path):
    await create_topics(kafka.bootstrap, topics)
    settings = make_settings(
        tmp_path=tmp_path, db_url=None, bootstrap=kafka.bootstrap, topics=topics, answers={"enabled": False}
    )
    daemon = Daemon(settings, skills=[Acknowledge()])
    shutdown = asyncio.Event()
    task = asyncio.create_task(daemon.run(shutdown))
    await wait_for(lambda: daemon.health.ready, 20)
    events: list[str] = []

    async def watch() -> None:
        async with (
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{daemon.http_port}", timeout=None) as client,
            client.stream("GET", "/api/live") as stream,
        ):
            async for kind, _ in sse_events(stream):
                events.append(kind)

    watchers = [asyncio.create_task(watch()) for _ in range(3)]
    await wait_for(lambda: events.count("hello") == 3, 10)
    produce(kafka.bootstrap, topics.input, [message(1, "c-9", "is it live?")])
    await wait_for(lambda: events.count("message") == 3 and events.count("suggestion") == 3, 20)
    shutdown.set()
    # The HTTP server would cut a stream still open after its own grace period; that would fail the gather.
    await asyncio.wait_for(task, 15)  # how long this takes is measured by bench.lifecycle, not asserted
    await asyncio.wait_for(asyncio.gather(*watchers), 5)  # the streams ended cleanly: the server closed them


async def test_a_running_daemon_picks_up_knowledge_another_process_imports(
    kafka: EmbeddedBroker, topics: Topics, tmp_path, embedder
):
    await create_topics(kafka.bootstrap, topics)
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "router.md").write_text("---\nid: router\ntitle: Router\n---\n\nThe router light is white.\n")
    settings = make_settings(
        tmp_path=tmp_path,
        bootstrap=kafka.bootstrap,
        topics=topics,
        knowledge={"paths": [folder], "refresh_interval_s": 0.2},
    )
    daemon = Daemon(settings)
    async with running(daemon):
        await wait_for(lambda: daemon.health.ready, 60)
        # `vigil kb import` in another process: the same database and vector store.
        importer = KnowledgeStore(
            engine=daemon.store.engine, embedder=embedder, clock=SystemClock(), chroma_path=settings.data_dir / "chroma"
        )
        await importer.open()
        (folder / "wifi.md").write_text("---\nid: wifi\ntitle: Wi-Fi\n---\n\nThe Wi-Fi password is on the sticker.\n")
        assert (await importer.import_files([folder])).added == 1

        async def found() -> bool:
            return "wifi" in {hit.entry_id for hit in await daemon.knowledge.search("wifi password sticker", 5)}

        await wait_for(found, 10)
        ran = daemon.metrics.registry.get_sample_value
        assert (ran("vigil_job_runs_total", {"job": "knowledge-refresh", "outcome": "ran"}) or 0) >= 1


async def test_readyz_names_the_knowledge_while_its_chroma_folder_is_gone(
    kafka: EmbeddedBroker, topics: Topics, tmp_path
):
    await create_topics(kafka.bootstrap, topics)
    settings = make_settings(tmp_path=tmp_path, bootstrap=kafka.bootstrap, topics=topics, knowledge={"paths": []})
    daemon = Daemon(settings)
    async with running(daemon):
        await wait_for(lambda: daemon.health.ready, 60)  # the knowledge check passed with the rest
        shutil.rmtree(settings.data_dir / "chroma")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{daemon.http_port}") as client:

            async def only_the_knowledge_named() -> bool:
                answer = await client.get("/readyz")
                return answer.status_code == 503 and set(answer.json()["problems"]) == {"knowledge"}

            await wait_for(only_the_knowledge_named, 10)
            assert "gone" in (await client.get("/readyz")).json()["problems"]["knowledge"]


async def test_readyz_names_the_phase_start_up_is_in(tmp_path):
    settings = make_settings(tmp_path=tmp_path, bootstrap=f"127.0.0.1:{free_port()}", answers={"enabled": False})
    daemon = Daemon(settings)
    assert daemon.phase is Phase.STARTING
    async with running(daemon):
        await wait_for(lambda: daemon.http_port is not None, 20)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{daemon.http_port}") as client:

            async def connecting() -> bool:
                answer = await client.get("/readyz")
                problems = answer.json()["problems"]
                return answer.status_code == 503 and problems.get("pipeline") == "connecting to the brokers"

            await wait_for(connecting, 20)  # migrated, and waiting for a broker nobody runs
            assert daemon.phase is Phase.CONNECTING
    assert daemon.phase is Phase.CONNECTING  # start-up gave way to the shutdown before it ever ran


async def test_the_event_loops_lag_is_measured_from_start_to_shutdown(tmp_path):
    settings = make_settings(tmp_path=tmp_path, bootstrap=f"127.0.0.1:{free_port()}", answers={"enabled": False})
    daemon = Daemon(settings)
    lag_count = "vigil_event_loop_lag_seconds_count"
    async with running(daemon):
        await wait_for(lambda: daemon.http_port is not None, 20)
        await wait_for(lambda: (daemon.metrics.registry.get_sample_value(lag_count) or 0) >= 3, 20)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{daemon.http_port}") as client:
            exposed = (await client.get("/metrics")).text
        assert "vigil_event_loop_lag_seconds_bucket" in exposed
        assert "vigil_event_loop_lag_max_seconds" in exposed
    stopped = daemon.metrics.registry.get_sample_value(lag_count)
    await asyncio.sleep(0.2)
    assert daemon.metrics.registry.get_sample_value(lag_count) == stopped  # the monitor ended with the daemon
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "vigil-loop-lag"]


@pytest.mark.parametrize(("db_url", "fenced"), [("sqlite", False), ("postgresql", True)], indirect=["db_url"])
async def test_kafka_fences_a_replica_the_group_moved_on_from_where_replicas_share_the_database(
    db_url: str, fenced: bool, tmp_path
):
    """Tenures are taken on PostgreSQL, which replicas share; on SQLite there is one process and no proof to pay."""
    settings = make_settings(tmp_path=tmp_path, db_url=db_url, bootstrap="127.0.0.1:1", answers={"enabled": False})
    composition = compose(settings)
    try:
        (source,) = composition.transports.sources
        assert isinstance(source, KafkaSource)
        assert (source._tenures is not None) is fenced
    finally:
        await composition.store.close()
