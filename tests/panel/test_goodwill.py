"""Goodwill against the concession budget on the lead's overview: per tenant the lead sees, the goodwill executed in
the rolling window against the budget, as a bar and numbers, and the controller's multiplier with what it means for
offers. Read through the actions capability's reader, which the composition root hands the panel."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry

from tests.cases.test_actions import record
from tests.conftest import views_of
from tests.panel.test_actions_view import TOKENS, USERS
from tests.panel.test_routes import NOW, say
from vigil.actions.budget import BudgetSettings
from vigil.actions.controller import ControllerState
from vigil.actions.standings import BudgetStandings
from vigil.actions.tables import CONCESSION
from vigil.app.health import Health
from vigil.app.http import create_app
from vigil.app.settings import Settings
from vigil.cases import actions as stored
from vigil.cases.store import CaseStore
from vigil.core.clock import ManualClock
from vigil.core.metrics import Metrics
from vigil.core.money import amount
from vigil.panel.auth import token_digest
from vigil.panel.display import Display
from vigil.panel.goodwill import window_words
from vigil.panel.settings import PanelSettings, PanelUser
from vigil.testing import panel_app, wired

ROOT = PanelUser(name="root", role="admin", tenants=["*"], token_sha256=token_digest("root-of-all"))
BUDGET = BudgetSettings(budget_cents=10_000, budgets_cents={"globex": 500})


async def paid(store: CaseStore, tenant: str, cents: int, ago: timedelta, n: int) -> None:
    """A goodwill credit of ``cents`` executed ``ago``."""
    conversation = f"{tenant}-{n}"
    await say(store, conversation, tenant, 1, "no internet for three days")
    action = record(conversation, amount=cents, name="issue_credit", at=NOW - ago, status="executed", goodwill=True)
    action.tenant, action.executed_at = tenant, NOW - ago
    async with store.engine.begin() as conn:
        await stored.insert(conn, action)


@pytest.fixture
async def spent(store: CaseStore) -> CaseStore:
    await paid(store, "acme", 2500, timedelta(hours=1), 1)
    await paid(store, "acme", 400, timedelta(days=2), 2)
    await paid(store, "acme", 9000, timedelta(days=8), 3)  # before the week's window
    await paid(store, "globex", 1000, timedelta(hours=3), 1)
    state = ControllerState(multiplier=0.25, updated_at=NOW)
    async with store.engine.begin() as conn:
        await conn.execute(CONCESSION.insert().values(tenant="acme", state=state.to_dict(), updated_at=NOW))
    return store


def overview_client(store: CaseStore) -> httpx.AsyncClient:
    app = panel_app(
        views=views_of(store),
        metrics=Metrics(CollectorRegistry()),
        clock=ManualClock(NOW),
        panel=PanelSettings(auth="tokens", users=[*USERS, ROOT]),
        budgets=BudgetStandings(BUDGET, store.engine, clock=ManualClock(NOW), timeout_s=5),
    )
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://vigil.test")


def lines(page: str) -> dict[str, str]:
    """Each tenant's line of the goodwill table, as text."""
    section = re.search(r'<section class="goodwill panel-box" id="goodwill".*?</section>', page, re.S)
    assert section, page[:400]
    rows = re.findall(r'<tr data-tenant="([^"]+)"[^>]*>(.*?)</tr>', section.group(0), re.S)
    return {tenant: " ".join(html.unescape(re.sub(r"<[^>]+>", " ", row)).split()) for tenant, row in rows}


async def test_a_lead_sees_goodwill_spent_in_the_window_against_the_budget_and_the_multiplier(spent: CaseStore):
    async with overview_client(spent) as client:
        lead = await client.get("/panel/overview", headers={"Authorization": f"Bearer {TOKENS['lia']}"})
        admin = await client.get("/panel/overview", headers={"Authorization": "Bearer root-of-all"})
        analyst = await client.get("/panel/overview", headers={"Authorization": f"Bearer {TOKENS['ana']}"})
    assert lead.status_code == 200 and analyst.status_code == 403
    # The lead of acme: acme only; the payment before the window does not count.
    assert lines(lead.text) == {
        "acme": "acme 29.00 of 100.00 in the last 7 days 29% multiplier 0.25 : offers at 75% of what a case merits"
    }
    assert re.search(r'<meter min="0" max="10000" low="8000" high="10000" optimum="0" value="2900"', lead.text)
    # An admin of every tenant: each tenant the budget knows; globex, on its own budget, is over it and its
    # controller has not stepped yet.
    seen = lines(admin.text)
    assert seen["globex"] == (
        "globex 10.00 of 5.00 in the last 7 days over budget (200%) multiplier 0.00 : offers at 100% of what a case "
        "merits"
    )
    assert set(seen) == {"acme", "globex"}
    assert 'class="over"' in admin.text


@pytest.mark.parametrize("actions_on", [True, False])
async def test_the_composition_root_hands_the_overview_the_budget_only_when_actions_are_on(
    tmp_path: Path, actions_on: bool
):
    settings = Settings(
        _env_file=None,
        answers={"enabled": False},
        actions={"enabled": actions_on},
        panel={"auth": "tokens", "users": [u.model_dump() for u in USERS]},
    )
    async with wired(tmp_path, settings=settings, capabilities=["cases", "actions", "panel"]) as vigil:
        app = create_app(health=Health({}, clock=vigil.clock, metrics=vigil.metrics, interval_s=1),
                         metrics=vigil.metrics, routers=vigil.parts.routers, panel=settings.panel)  # fmt: skip
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://vigil.test") as client:
            page = await client.get("/panel/overview", headers={"Authorization": f"Bearer {TOKENS['lia']}"})
    assert page.status_code == 200
    if actions_on:  # the lead's one tenant, nothing spent yet
        assert lines(page.text) == {
            "acme": "acme 0.00 of 1,000.00 in the last 7 days 0% multiplier 0.00 : offers at 100% of what a case merits"
        }
    else:
        assert 'id="goodwill"' not in page.text


def test_money_and_windows_are_written_for_people():
    assert (amount(123456789), amount(5), amount(-250)) == ("1,234,567.89", "0.05", "-2.50")
    pounds, francs, none = Display(currency="GBP"), Display(currency="CHF"), Display()
    assert (pounds.money(6249), pounds.money(-1000), francs.money(1250), none.money(1250)) == (
        "£62.49",
        "-£10.00",
        "12.50 CHF",
        "12.50",
    )
    assert (window_words(7 * 86400), window_words(86400), window_words(12 * 3600)) == ("7 days", "1 day", "12 hours")
    assert window_words(5400) == "1h 30m"
