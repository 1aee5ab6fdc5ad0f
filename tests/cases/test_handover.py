"""The handover brief, read from what is stored of a case: what was tried is the actions run or under way and the
analysts' steps, not their courtesy. On the real pipeline (vigil.testing.wired), and on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from tests.cases.test_actions import record
from tests.progress.test_skill import T0, say, settings
from vigil.cases import actions
from vigil.cases.handover import brief
from vigil.core.clock import ManualClock
from vigil.testing import wired


async def test_tried_lists_the_actions_run_and_what_the_analyst_did_not_their_apologies(tmp_path: Path, db_url: str):
    async with wired(tmp_path, settings=settings(tmp_path, db_url), clock=ManualClock(T0)) as vigil:
        await vigil.send(say(1, "customer", "I took a day off and the engineer never came.", 0))
        await vigil.send(say(2, "analyst", "I'm so sorry Owen. That must be really frustrating.", 1))
        await vigil.send(say(3, "analyst", "Can you confirm the postcode for the visit?", 2))
        await vigil.send(say(4, "analyst", "Thanks. I've rebooked the engineer for Thursday morning.", 3))
        async with vigil.store.engine.begin() as conn:
            await actions.insert(conn, record(amount=2000, status="executed", name="goodwill_credit"))
            await actions.insert(conn, record(amount=9900, status="suggested", verdict="deny"))  # never tried
            found = await brief(conn, "c-1")
    assert found is not None
    assert found.tried == ["Goodwill credit ORD-1, 20.00: done", "I've rebooked the engineer for Thursday morning."]
    assert "Tried: Goodwill credit ORD-1, 20.00: done; I've rebooked the engineer" in found.text
