"""The concession budget against the store, on SQLite and PostgreSQL: the controller steps from the goodwill
executed, its state is shared through the database, and offers shrink, then stop, as spend runs over budget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry

from tests.cases.test_actions import record
from vigil.actions.budget import BudgetMetrics, BudgetSettings, ConcessionBudget
from vigil.actions.concessions import Concessions
from vigil.cases import actions as stored
from vigil.cases.store import CaseStore
from vigil.core.clock import ManualClock

T0 = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)


def concessions(store: CaseStore, clock: ManualClock, registry: CollectorRegistry, **budget: object) -> Concessions:
    settings = BudgetSettings.model_validate({"budget_cents": 16_800, "period_s": 3600, **budget})
    return Concessions(
        ConcessionBudget(settings), store.engine, clock=clock, metrics=BudgetMetrics(registry), timeout_s=5
    )


async def spent(store: CaseStore, cents: int, at: datetime, n: int) -> None:
    async with store.engine.begin() as conn:
        await stored.insert(
            conn,
            record(
                f"g-{n}", amount=cents, at=at, goodwill=True, status="executed", executed_at=at, name="issue_credit"
            ),
        )


async def test_offers_are_whole_while_spend_is_on_budget_then_shrink_and_stop_when_it_runs_over(store: CaseStore):
    clock, registry = ManualClock(T0), CollectorRegistry()
    budget = concessions(store, clock, registry)
    first = await budget.offer("acme", 1000)
    assert first is not None and first.value == 1000 and first.source["source"] == "budget"
    # 16,800 a week is 100 an hour; 3,000 an hour for six hours is thirty times the rate.
    for hour in range(6):
        await spent(store, 3000, T0 + timedelta(hours=hour, minutes=30), hour)
    offers = []
    for hour in range(1, 8):
        clock.advance_to(T0 + timedelta(hours=hour))
        found = await budget.offer("acme", 1000)
        offers.append(found.value if found else 0)
    assert offers[0] < 1000 and offers[-1] == 0 and offers == sorted(offers, reverse=True)
    assert registry.get_sample_value("vigil_concession_multiplier", {"tenant": "acme"}) == 1.0
    assert registry.get_sample_value("vigil_concession_spend_cents", {"tenant": "acme"}) == 18_000


async def test_every_replica_steps_the_same_stored_controller(store: CaseStore):
    clock = ManualClock(T0)
    one, two = concessions(store, clock, CollectorRegistry()), concessions(store, clock, CollectorRegistry())
    await spent(store, 5000, T0 - timedelta(minutes=10), 0)
    await one.step("acme")
    clock.advance_to(T0 + timedelta(minutes=30))
    # Within the period: the second replica finds the first's step and takes none of its own.
    assert (await two.step("acme")) == (await one.step("acme"))
    clock.advance_to(T0 + timedelta(hours=1, minutes=1))
    stepped = await two.step("acme")
    assert stepped.updated_at == T0 + timedelta(hours=1, minutes=1)
    assert (await one.step("acme")) == stepped
