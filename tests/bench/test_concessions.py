"""The concession budget in simulation (bench/concessions.py): with the default gains a tenant's goodwill spend
settles on its budget after a step in demand and stays there, and the check that says so catches a loop that does
not (no controller, or an integral gain twenty times too high)."""

from __future__ import annotations

from bench import concessions as bench
from vigil.actions.budget import BudgetSettings

STEP_UP = bench.SCENARIOS[2]
UNDER = bench.SCENARIOS[1]
SEEDS = (200, 201)  # neither a tuning seed nor a reported one


def converges(settings: BudgetSettings, seed: int) -> bool:
    """After demand steps from half the budget to 2.5 times it: settled within 10% inside two weeks, within 3% of
    the budget over the last week, and no oscillation: at most one crossing of the +-5% band, the week's spend
    swinging by less than 5% of the budget, and the multiplier not slamming offers between full and nothing."""
    trace = bench.simulate(STEP_UP, settings, seed)
    first, end, level = STEP_UP.bounds()[1]
    assert level > 1
    r = bench.response(trace.ratio[first:end], trace.multiplier[first:end], STEP_UP.tolerance)
    settled = r.settle_days is not None and r.settle_days <= 14 and abs(r.error) <= 0.03
    return settled and r.crossings <= 1 and r.swing < 0.05 and r.spread < 0.6


def test_with_the_default_gains_spend_settles_on_the_budget_without_oscillating() -> None:
    for seed in SEEDS:
        assert converges(BudgetSettings(), seed)


def test_without_the_controller_spend_does_not_converge() -> None:
    assert not any(converges(BudgetSettings(enabled=False), seed) for seed in SEEDS)


def test_an_integral_gain_twenty_times_too_high_is_caught_as_oscillation() -> None:
    settings = BudgetSettings()
    hot = settings.model_copy(update={"ki": settings.ki * 20})
    assert not any(converges(hot, seed) for seed in SEEDS)


def test_below_budget_the_controller_does_not_cut_offers() -> None:
    trace = bench.simulate(UNDER, BudgetSettings(), SEEDS[0])
    assert max(trace.multiplier) < 0.2
    assert sum(trace.multiplier) / len(trace.multiplier) < 0.01
    assert 0.4 < sum(trace.ratio[-24 * 7 :]) / (24 * 7) < 0.6
