"""The concession budget: the PID-Lagrangian's multiplier, the offers it sizes, the rolling spend and the gauges."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry

from vigil.actions.budget import BudgetMetrics, BudgetSettings, ConcessionBudget, generosity, rolling_spend
from vigil.actions.controller import ControllerState, PidLagrangian

NOW = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def run(controller: PidLagrangian, costs: list[float], state: ControllerState | None = None) -> list[ControllerState]:
    """One step an hour on each cost, against a limit of 1; every state after each step."""
    state = state or ControllerState()
    start = state.updated_at + HOUR if state.updated_at else NOW
    out = []
    for i, cost in enumerate(costs):
        state = controller.update(state, cost, 1.0, start + i * HOUR)
        out.append(state)
    return out


def test_the_multiplier_rises_while_spend_runs_over_and_stops_at_its_ceiling() -> None:
    states = run(PidLagrangian(kp=0.1, ki=0.01, kd=0.1), [1.5] * 300)
    multipliers = [s.multiplier for s in states]
    assert multipliers[0] > 0
    assert multipliers == sorted(multipliers)
    assert multipliers[50] > multipliers[0]
    assert multipliers[-1] == 1.0


def test_the_multiplier_falls_to_zero_when_spend_runs_under() -> None:
    controller = PidLagrangian(kp=0.2, ki=0.02, kd=0.2)
    over = run(controller, [1.5] * 100)
    under = run(controller, [0.5] * 200, over[-1])
    assert over[-1].multiplier > 0.5
    assert under[-1].multiplier == 0.0
    assert under[-1].integral == 0.0


def test_a_long_overrun_does_not_wind_the_integral_up_beyond_what_the_ceiling_needs() -> None:
    controller = PidLagrangian(kp=0.0, ki=0.01, kd=0.0)
    long_over = run(controller, [2.0] * 5_000)
    assert max(s.integral for s in long_over) <= 1.0 / 0.01
    # Unwinding takes at most ceiling / Ki / |error| steps (200 here), not the 10,000 an unbounded sum would need.
    under = run(controller, [0.5] * 250, long_over[-1])
    first_zero = next(i for i, s in enumerate(under) if s.multiplier == 0.0)
    assert first_zero <= 200


def test_time_under_budget_banks_no_credit() -> None:
    controller = PidLagrangian(kp=0.0, ki=0.05, kd=0.0)
    after_quiet = run(controller, [0.1] * 500 + [1.2])
    assert after_quiet[-2].integral == 0.0
    assert after_quiet[-1].multiplier > 0


def test_the_derivative_pushes_only_on_a_rising_cost() -> None:
    states = run(PidLagrangian(kp=0.0, ki=0.0, kd=1.0), [1.0, 1.3, 1.2])
    assert [round(s.multiplier, 6) for s in states] == [0.0, 0.3, 0.0]


def test_a_step_is_taken_at_most_once_a_period_and_never_backwards() -> None:
    controller = PidLagrangian(kp=0.5, ki=0.1, kd=0.0, period_s=3600)
    stepped = controller.update(ControllerState(), 2.0, 1.0, NOW)
    assert controller.update(stepped, 5.0, 1.0, NOW + timedelta(minutes=59)) is stepped
    assert controller.update(stepped, 5.0, 1.0, NOW - HOUR) is stepped
    assert controller.update(stepped, 5.0, 1.0, NOW + HOUR).multiplier > stepped.multiplier


def test_the_state_round_trips_through_json() -> None:
    states = run(PidLagrangian(kp=0.3, ki=0.02, kd=0.4), [1.4, 1.7, 0.9])
    for state in [ControllerState(), *states]:
        assert ControllerState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


def test_offers_are_whole_cents_never_above_the_base_and_never_negative() -> None:
    budget = ConcessionBudget(BudgetSettings(min_offer_cents=0))
    rng = random.Random(7)
    for _ in range(5_000):
        base = rng.choice([0, 1, 3, 99, 100, 101, rng.randint(0, 10**7)])
        offer = budget.offer(base, ControllerState(multiplier=rng.random()))
        assert isinstance(offer.amount_cents, int)
        assert 0 <= offer.amount_cents <= base
    assert budget.offer(-500, ControllerState()).amount_cents == 0


def test_the_offer_shrinks_with_the_multiplier_from_the_full_base_to_nothing() -> None:
    budget = ConcessionBudget(BudgetSettings(min_offer_cents=0))
    amounts = [budget.offer(10_001, ControllerState(multiplier=m / 10)).amount_cents for m in range(11)]
    assert amounts[0] == 10_001
    assert amounts[5] == 5_000  # 5,000.5 rounded down
    assert amounts[-1] == 0
    assert amounts == sorted(amounts, reverse=True)
    assert generosity(0.25) == 0.75


def test_a_scaled_down_offer_below_the_minimum_is_not_made_but_a_small_full_one_is() -> None:
    budget = ConcessionBudget(BudgetSettings(min_offer_cents=100))
    assert budget.offer(150, ControllerState(multiplier=0.5)).amount_cents == 0
    assert budget.offer(80, ControllerState(multiplier=0.0)).amount_cents == 80
    assert budget.offer(300, ControllerState(multiplier=0.5)).amount_cents == 150


def test_a_disabled_budget_offers_the_base_and_leaves_the_controller_still() -> None:
    budget = ConcessionBudget(BudgetSettings(enabled=False))
    state = ControllerState(multiplier=0.9, integral=3.0)
    assert budget.offer(1_234, state).amount_cents == 1_234
    assert budget.update(state, [(NOW, 10**9)], "acme", NOW + HOUR) is state


def test_rolling_spend_counts_what_fell_in_the_window_only() -> None:
    week = 7 * 24 * 3600.0
    spends = [
        (NOW - timedelta(days=7), 1_000),  # exactly a window ago: out
        (NOW - timedelta(days=6, hours=23), 200),
        (NOW, 30),
        (NOW + timedelta(seconds=1), 4),  # not yet
    ]
    assert rolling_spend(spends, NOW, week) == 230


def test_the_cost_is_the_spend_rate_against_the_budget_rate() -> None:
    settings = BudgetSettings(budget_cents=70_000, window_s=7 * 86400.0, horizon_s=86400.0)
    budget = ConcessionBudget(settings)
    on_rate = [(NOW - timedelta(hours=h), 10_000 // 24) for h in range(24)]
    assert abs(budget.cost(on_rate, "acme", NOW) - 1.0) < 0.01
    double = on_rate + on_rate
    assert abs(budget.cost(double, "acme", NOW) - 2.0) < 0.02


def test_tenants_have_their_own_budget_with_a_default_for_the_rest() -> None:
    settings = BudgetSettings(budget_cents=5, budgets_cents={"acme": 900, "*": 50})
    assert settings.budget_for("acme") == 900
    assert settings.budget_for("globex") == 50
    assert BudgetSettings(budget_cents=5).budget_for("globex") == 5


def test_spend_budget_and_multiplier_are_gauges_per_tenant() -> None:
    registry = CollectorRegistry()
    metrics = BudgetMetrics(registry)
    metrics.record("acme", spend_cents=12_345, budget_cents=100_000, multiplier=0.25)
    assert registry.get_sample_value("vigil_concession_spend_cents", {"tenant": "acme"}) == 12_345
    assert registry.get_sample_value("vigil_concession_budget_cents", {"tenant": "acme"}) == 100_000
    assert registry.get_sample_value("vigil_concession_multiplier", {"tenant": "acme"}) == 0.25
