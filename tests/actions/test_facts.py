"""The goodwill a customer was given, as the rules read it, counts every credit that may have been paid: one whose
write timed out (in doubt) or that is running keeps the next conversation under the monthly cap, on SQLite and
PostgreSQL, through the real pipeline against the demo's systems over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.actions.systems import Shop, settings
from tests.actions.test_skill import T0, Chat, action_of
from tests.cases.test_actions import record
from vigil.cases import actions as stored
from vigil.core.clock import ManualClock
from vigil.testing import Wired, wired

CUSTOMER = "CUS-1002"


@pytest.fixture
async def vigil(tmp_path: Path, db_url: str, shop: Shop) -> AsyncIterator[Wired]:
    async with wired(
        tmp_path, settings=settings(shop, db_url), clock=ManualClock(T0), capabilities=["cases", "actions"]
    ) as running:
        yield running


@pytest.mark.parametrize(
    ("earlier", "verdict"),
    [
        ("in_doubt", ("deny", "goodwill_monthly_cap")),
        ("executing", ("deny", "goodwill_monthly_cap")),
        ("failed", ("needs_approval", "credit_needs_approval")),
    ],
)
async def test_a_credit_that_may_have_been_paid_counts_toward_the_customers_monthly_goodwill(
    vigil: Wired, earlier: str, verdict: tuple[str, str]
):
    yesterday = T0 - timedelta(days=1)
    credit = record(
        "c-yesterday", name="issue_credit", amount=5500, customer=CUSTOMER, goodwill=True, status=earlier,
        suggested_at=yesterday, decided_at=yesterday, verdict="needs_approval", rule="large_credit_needs_lead",
    )  # fmt: skip
    async with vigil.store.engine.begin() as conn:
        await stored.insert(conn, credit)

    chat = Chat(vigil, "c-today", CUSTOMER)
    await chat.say("analyst", "Thanks, your identity is verified.")
    await chat.say("customer", "I've had no internet for three days, I want compensation")
    await chat.say("analyst", "I can add a goodwill credit of £10.00 to your account. Shall I go ahead?")
    await chat.say("customer", "yes please")
    action = action_of(chat.cards()[-1])
    assert (action["name"], action["arguments"]["amount_cents"]) == ("issue_credit", 1000)
    assert (action["verdict"], action["rule"]) == verdict
    async with vigil.store.engine.connect() as conn:
        [today] = await stored.of_conversation(conn, "c-today")
    assert today.facts["goodwill"] == {"last_30_days_cents": 0 if earlier == "failed" else 5500}
