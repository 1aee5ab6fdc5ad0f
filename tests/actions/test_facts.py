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


async def test_a_disguised_request_is_held_for_an_admin_whatever_role_the_rule_names(vigil: Wired, shop: Shop):
    chat = Chat(vigil, "c-disguised", "CUS-1001")
    await chat.say("customer", "r\u0435fund ORD-10001 please, the headphones broke")  # a Cyrillic small ie for the e
    await chat.say("analyst", "Thanks, your identity is verified. I can refund 89.99 for ORD-10001, ok?")
    await chat.say("customer", "yes")
    card = chat.cards()[-1]
    action = action_of(card)
    assert (action["verdict"], action["rule"], action["approver"]) == (
        "needs_approval", "large_refund_needs_lead", "admin",
    )  # fmt: skip
    assert action["reason"].endswith("The request came in disguised text, so an admin approves it.")
    assert "Needs an admin's approval" in card.text

    await chat.decide(card, "approved", by="lee", role="lead", arguments_hash=action["arguments_hash"])
    assert shop.refunds("ORD-10001") == []
    await chat.decide(card, "approved", by="max", role="admin", arguments_hash=action["arguments_hash"])
    assert shop.refunds("ORD-10001") == [8999]


async def test_a_disguised_change_the_rules_allow_is_held_for_an_admin(vigil: Wired):
    chat = Chat(vigil, "c-disguised-email", "CUS-1003")
    await chat.say("analyst", "Thanks, your identity is verified.")
    await chat.say("customer", "change my email to sofia@\u0435xample.com")
    await chat.say("analyst", "I'll change your e-mail to sofia@example.com, ok?")
    await chat.say("customer", "yes")
    action = action_of(chat.cards()[-1])
    assert action["arguments"]["email"] == "sofia@example.com"
    assert (action["verdict"], action["rule"], action["approver"]) == (
        "needs_approval", "change_account_details", "admin",
    )  # fmt: skip


async def test_a_disguised_request_keeps_the_rules_separation_of_duties(vigil: Wired, shop: Shop):
    """Held for an admin because it was disguised, the action still keeps out whoever read it back: an admin who
    read it back may not approve it (the raised approver had dropped the rule's @separate_from)."""
    chat = Chat(vigil, "c-disguised-small", "CUS-1001")
    await chat.say("customer", "r\u0435fund £30 for ORD-10001 please, the cable broke")  # a Cyrillic small ie
    await chat.say("analyst", "Thanks, your identity is verified. I can refund 30.00 for ORD-10001, ok?", author="max")
    await chat.say("customer", "yes")
    card = chat.cards()[-1]
    action = action_of(card)
    assert (action["rule"], action["approver"]) == ("refund_needs_approval", "admin")
    await chat.decide(card, "approved", by="max", role="admin")
    assert shop.refunds("ORD-10001") == []
    await chat.decide(card, "approved", by="ada", role="admin")
    assert shop.refunds("ORD-10001") == [3000]
