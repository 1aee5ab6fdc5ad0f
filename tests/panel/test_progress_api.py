"""The API's view of a case's progress: its state and timers, its commitments, and the handover brief on demand."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.panel.test_routes import USERS, bearer
from tests.progress.test_skill import T0, change, say, settings
from vigil import testing
from vigil.core.clock import ManualClock
from vigil.panel.settings import PanelSettings
from vigil.testing import Wired, wired


@pytest.fixture
async def vigil(tmp_path: Path) -> AsyncIterator[Wired]:
    async with wired(tmp_path, settings=settings(tmp_path), clock=ManualClock(T0)) as running:
        await running.send(change(1, "opened", 0, assignee="sam", priority="high"))
        await running.send(say(2, "customer", "I was charged twice for my December bill.", 1))
        await running.send(say(3, "analyst", "I can see it. I'll email you the refund confirmation by 5pm today.", 2))
        await running.send(say(4, "customer", "any update?", 30))
        yield running


@pytest.fixture
async def client(vigil: Wired) -> AsyncIterator[httpx.AsyncClient]:
    app = testing.panel_app(
        views=vigil.views, metrics=vigil.metrics, clock=vigil.clock, panel=PanelSettings(auth="tokens", users=USERS)
    )
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://vigil.test") as c:
        yield c


async def test_a_conversation_gives_its_state_running_timers_and_commitments(client: httpx.AsyncClient):
    got = (await client.get("/api/conversations/c-1", headers=bearer("ana"))).json()
    # On the analyst since the promise (09:02), which the customer's chasing leaves there.
    assert got["state"]["status"] == "waiting_on_analyst" and got["state"]["since"] == "2026-03-10T09:02:00Z"
    timers = {t["kind"]: t["due_at"] for t in got["state"]["timers"]}
    assert timers == {
        "next_response": "2026-03-10T09:50:00Z",
        "resolution": "2026-03-11T09:00:00Z",
        "commitment": "2026-03-10T17:00:00Z",
    }
    (promise,) = got["commitments"]
    assert promise["status"] == "open" and promise["due_at"] == "2026-03-10T17:00:00Z"
    assert promise["commitment_id"] == "c-1-m3#1" and promise["message_id"] == "c-1-m3"
    assert got["progress"]["chases"] == 1


async def test_the_queue_sorts_by_what_falls_due_first(client: httpx.AsyncClient, vigil: Wired):
    await vigil.send(say(1, "customer", "My parcel never came", 35, "c-2"))  # first response due 09:45
    queue = (await client.get("/api/queue", headers=bearer("ana"))).json()
    assert [(c["conversation_id"], c["next_due_at"]) for c in queue] == [
        ("c-2", "2026-03-10T09:45:00Z"),
        ("c-1", "2026-03-10T09:50:00Z"),
    ]


async def test_the_handover_brief_is_given_on_demand_as_json_and_text(client: httpx.AsyncClient):
    answer = await client.get("/api/conversations/c-1/handover", headers=bearer("ana"), params={"tz": "Europe/London"})
    assert answer.status_code == 200
    brief = answer.json()
    assert brief["problem"] == "I was charged twice for my December bill."
    assert brief["tried"] == ["I can see it."]
    assert [c["due_at"] for c in brief["open_commitments"]] == ["2026-03-10T17:00:00Z"]
    assert brief["sentiment"]["chases"] == 1 and brief["assignee"] == "sam" and brief["priority"] == "high"
    assert "Open promises: email you the refund confirmation" in brief["text"] and "17:00 GMT" in brief["text"]


async def test_the_handover_of_another_tenants_or_no_case_is_not_found_and_a_bad_zone_is_refused(
    client: httpx.AsyncClient,
):
    assert (await client.get("/api/conversations/c-1/handover", headers=bearer("lee"))).status_code == 404
    assert (await client.get("/api/conversations/nope/handover", headers=bearer("ana"))).status_code == 404
    bad = await client.get("/api/conversations/c-1/handover", headers=bearer("ana"), params={"tz": "Mars/Olympus"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "tz"]
    assert (await client.get("/api/conversations/c-1/handover")).status_code == 401
