"""`vigil demo`: its own broker, the daemon and live demo traffic, all stopped by one Ctrl-C."""

from __future__ import annotations

import json
import shlex
import signal
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from tests.e2e.harness import (
    BASE_ENV,
    Database,
    VigilCli,
    VigilProcess,
    at,
    child_pids,
    eventually,
    message,
    pid_alive,
    process_name,
    ready,
)

pytestmark = pytest.mark.e2e


def brokers_of(process: VigilProcess) -> list[int]:
    return [pid for pid in child_pids(process.pid) if process_name(pid) == "tansu"]


async def stop_and_check_nothing_left(process: VigilProcess, broker_pids: list[int]) -> None:
    process.stop(signal.SIGINT)  # exit 0 within stop()'s deadline; bench.lifecycle measures how long it takes
    left = [pid for pid in broker_pids if pid_alive(pid)]
    assert not left, f"the demo's broker is still running: {left}"


async def test_demo_without_traffic_runs_its_own_broker_and_cleans_up(vigil: VigilCli, tmp_path: Path) -> None:
    demo = vigil.start("demo", "--no-traffic")
    await ready(demo, timeout_s=30)
    brokers = brokers_of(demo)
    assert len(brokers) == 1, f"expected one tansu child, found {brokers}"
    assert (tmp_path / "data" / "broker.log").exists()
    await stop_and_check_nothing_left(demo, brokers)


async def test_demo_plays_conversations_that_get_stored(vigil: VigilCli, tmp_path: Path) -> None:
    demo = vigil.start("demo", VIGIL_DEMO__PACE_S="0.05")
    await ready(demo, timeout_s=30)
    brokers = brokers_of(demo)
    assert len(brokers) == 1, f"expected one tansu child, found {brokers}"
    db = Database(f"sqlite:///{tmp_path / 'data' / 'vigil.db'}")

    def busy_conversation() -> str | None:
        rows = db.query("SELECT conversation_id FROM message GROUP BY conversation_id HAVING count(*) >= 3")
        return str(rows[0][0]) if rows else None

    conversation_id = await eventually("a demo conversation stored", busy_conversation, timeout_s=30, process=demo)
    assert conversation_id.startswith("demo-")
    view = demo.conversation(conversation_id)
    assert view is not None
    assert len(view["messages"]) >= 3
    assert all(m["text"] for m in view["messages"])
    assert demo.metric("vigil_events_consumed_total", type="message") >= 3
    await stop_and_check_nothing_left(demo, brokers)


@pytest.mark.timeout(420)  # the answers need the embedding model, which the demo loads before it is ready
async def test_make_run_answers_the_demo_customers_from_the_help_centre(vigil: VigilCli, tmp_path: Path) -> None:
    # What `make run` advertises: the demo traffic at its own pace, answers on as by default, suggestions with
    # their sources in the panel's API.
    demo = vigil.start("demo", VIGIL_ANSWERS__ENABLED="true")
    await ready(demo, timeout_s=240)
    db = Database(f"sqlite:///{tmp_path / 'data' / 'vigil.db'}")

    def answered() -> tuple[dict[str, Any], dict[str, Any]] | None:
        rows = db.query("SELECT DISTINCT conversation_id FROM suggestion WHERE kind = 'answer' ORDER BY 1")
        for (conversation_id,) in rows:
            view = demo.conversation(str(conversation_id))
            for suggestion in (view or {}).get("suggestions", []):
                if suggestion["kind"] == "answer":
                    return view or {}, suggestion
        return None

    view, answer = await eventually("a demo customer answered", answered, timeout_s=150, process=demo)
    assert view["conversation_id"].startswith("demo-")
    asked = [m for m in view["messages"] if m["message_id"] == answer["in_reply_to"]]
    assert [m["role"] for m in asked] == ["customer"], (answer, view["messages"])
    assert answer["text"] and answer["sources"], answer
    assert {source["kind"] for source in answer["sources"]} <= {"faq", "article"}
    assert answer["confidence"] >= 0.5
    await stop_and_check_nothing_left(demo, brokers_of(demo))


# Trying it on your own traffic: the banner, `vigil send` through the data dir, and a tidy queue after a restart.


def banner_of(process: VigilProcess) -> list[str] | None:
    """The banner lines `vigil demo` printed (stdout shares the log), or None while it has not yet."""
    lines = process.log().splitlines()
    if "vigil demo is ready" not in lines:
        return None
    start = lines.index("vigil demo is ready")
    banner = lines[start : start + 5]
    return banner if len(banner) == 5 else None


@pytest.mark.timeout(420)  # the answers need the embedding model, which the demo loads before it is ready
async def test_a_message_sent_with_the_banners_command_gets_a_suggestion_in_the_panel(
    vigil: VigilCli, tmp_path: Path
) -> None:
    demo = vigil.start("demo", "--no-traffic", VIGIL_ANSWERS__ENABLED="true")
    banner = await eventually("the demo's banner", lambda: banner_of(demo), timeout_s=240, process=demo)
    demo_file = tmp_path / "data" / "demo.json"
    address = json.loads(demo_file.read_text())
    assert f"panel:   {demo.base_url}/panel" in banner[1]
    assert f"broker:  {address['bootstrap_servers']} " in banner[2]
    assert address["bootstrap_servers"] in demo.log()  # the broker is there, where it says
    command = shlex.split(banner[4].strip())
    assert Path(command[0]).name == "vigil" and command[1] == "send"  # "vigil" if it is on the PATH, else its path
    assert address["tenant"] == "brightwave"  # the demo's conversations'

    sent = vigil.call(*command[1:])  # no VIGIL_KAFKA__BOOTSTRAP_SERVERS: found through the data dir
    assert sent.returncode == 0, sent.stderr
    assert "(tenant brightwave)" in sent.stdout  # the demo's tenant, as the demo's own conversations are
    conversation_id = command[command.index("--conversation") + 1]

    def answered() -> dict[str, Any] | None:
        view = demo.conversation(conversation_id)
        return view if view and view["messages"] and view["suggestions"] else None

    def silences() -> dict[str, float]:
        return {dict(k[1]).get("reason", ""): v for k, v in demo.metrics().items() if "suppressed" in k[0]}

    view = await eventually("the message and its suggestion", answered, timeout_s=90, process=demo, show=silences)
    assert view["messages"][0]["text"] == command[-1]
    assert view["messages"][0]["role"] == "customer"
    queue = demo.get("/api/queue").json()
    assert conversation_id in json.dumps(queue)

    # A message vigil refuses is a failure, with vigil's reason, not "sent".
    refused = vigil.call("send", "--conversation", conversation_id, "--tenant", "acme", "and another thing")
    assert refused.returncode == 1, refused.stdout
    assert f"was dead-lettered to {address['dlq_topic']}: tenant_mismatch: conversation" in refused.stderr, (
        refused.stderr
    )
    # The customer named, for an action on their account.
    named = vigil.call("send", "--conversation", "try-2", "--customer", "C-1042", "Please refund my last order")
    assert named.returncode == 0, named.stderr
    view = await eventually("the named message", lambda: demo.conversation("try-2"), timeout_s=30, process=demo)
    assert view["messages"][0]["metadata"] == {"customer_id": "C-1042"}

    mine = tmp_path / "mine.jsonl"  # replay finds the demo the same way
    mine.write_text(json.dumps(message("mine-1", "m-1", "Is there an outage near me?", sent_at=at(0))) + "\n")
    replayed = vigil.call("replay", str(mine))
    assert replayed.returncode == 0, replayed.stderr
    await eventually("the replayed message stored", lambda: demo.conversation("mine-1"), timeout_s=30, process=demo)
    await stop_and_check_nothing_left(demo, brokers_of(demo))
    assert not demo_file.exists(), "the discovery file outlived its demo"


async def test_send_and_replay_without_a_running_demo_say_what_to_do(vigil: VigilCli, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text('{"type": "message"}\n')
    for args in (("send", "--conversation", "c-1", "hello"), ("replay", str(events))):
        result = vigil.call(*args, timeout_s=30)
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.splitlines()) == 1, result.stderr
        assert result.stderr.startswith("vigil: invalid setting VIGIL_KAFKA__BOOTSTRAP_SERVERS: not set")
        assert "no vigil demo is running" in result.stderr and "`vigil demo`" in result.stderr


async def test_a_restarted_demo_closes_what_earlier_runs_left_open(vigil: VigilCli, tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'data' / 'vigil.db'}")

    def open_demo_conversations() -> list[str]:
        rows = db.query("SELECT id FROM conversation WHERE status != 'closed' AND id LIKE 'demo-%' ORDER BY id")
        return [conversation_id for (conversation_id,) in rows]

    first = vigil.start("demo", VIGIL_DEMO__PACE_S="0.05")
    await ready(first, timeout_s=30)
    await eventually("a demo conversation half-played", open_demo_conversations, timeout_s=30, process=first)
    # The traffic waited for the daemon, so the input topic is vigil's, with its partitions: not one the broker
    # made on the first message with its own default.
    address = json.loads((tmp_path / "data" / "demo.json").read_text())
    assert await partitions(address["bootstrap_servers"], address["input_topic"]) == int(
        BASE_ENV["VIGIL_KAFKA__PARTITIONS"]
    )
    await stop_and_check_nothing_left(first, brokers_of(first))
    left_open = open_demo_conversations()
    assert left_open, "the first run left nothing open to tidy"

    second = vigil.start("demo", "--no-traffic")
    await eventually("the earlier runs' conversations closed", lambda: not open_demo_conversations(), 30, second)
    tidied = db.query("SELECT conversation_id FROM case_event WHERE event = 'closed' AND event_id LIKE '%-tidy'")
    assert sorted(conversation_id for (conversation_id,) in tidied) == left_open  # each closed by a case event
    assert db.scalar("SELECT count(*) FROM conversation WHERE id LIKE 'demo-%' AND resolved_by = 'bot'") >= len(
        left_open
    )
    assert banner_of(second) is not None
    await stop_and_check_nothing_left(second, brokers_of(second))


async def partitions(bootstrap: str, topic: str) -> int:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        (described,) = await admin.describe_topics([topic])
        return len(described["partitions"])
    finally:
        await admin.close()
