"""`vigil demo`: its own broker, the daemon and live demo traffic, all stopped by one Ctrl-C."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.e2e.harness import Database, VigilCli, VigilProcess, child_pids, eventually, pid_alive, process_name, ready

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
