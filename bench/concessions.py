"""The concession budget in simulation (issue 14): does goodwill spend converge to the budget without oscillating?

Simulated tenants over ``DAYS`` days of simulated time, stepped hourly. Goodwill opportunities arrive as a Poisson
stream; each case merits a base amount drawn from a log-normal (median ``MEDIAN_BASE_CENTS``, sigma ``SIGMA``: many
small gestures, a few large ones). ``vigil.actions.budget.ConcessionBudget`` sizes each offer from the tenant's
controller state, and the customer accepts it with a probability that falls as the offer shrinks
(``accept_probability``: 0.95 for the full amount, 0.55 for almost nothing); only accepted offers are spent. The
controller steps once an hour on the spends of the measurement horizon, as the daemon would.

Demand is the spend per window the opportunities would make if every offer were in full, as a multiple of the
budget. Scenarios (``SCENARIOS``): well above budget from a cold start (no spend history), below budget, a step up
mid-run from below to well above, and a step down mid-run from well above to less above.

Controllers compared (``FAMILIES``): none (every offer in full), pure integral, PI, PID, and PID on the window's own
sum (``horizon_s = window_s``) instead of the one-day spend rate. Each family's gains are tuned by grid search on
``TUNE_SEEDS`` and reported on ``TEST_SEEDS``, which tuning never sees.

Measured on the window's spend against the budget, ``r = spend in the last 7 days / budget``, sampled hourly, in each
segment whose demand is above budget (where the target is r = 1):
- **settling**: days from the segment's start until r stays within ``TOLERANCE`` of 1 to the segment's end;
- **overshoot**: the largest r - 1 in the segment;
- **steady-state error**: the mean of r - 1 over the segment's last ``TAIL_DAYS`` days;
- **swing**: max r - min r over those days (the amplitude of what remains);
- **spread**: the multiplier's 5th to 95th percentile over those days (a controller that slams offers between
  full and nothing hour to hour can hold the week's sum on budget while customers see erratic offers);
- **crossings**: after settling, how often r goes from above 1 + half the tolerance to below 1 - half the tolerance
  or back (sustained oscillation crosses again and again; a damped loop on noisy demand rarely does).
In segments below budget the controller should not cut: the mean multiplier there is reported.

Run: ``python -m bench.concessions`` (each family's recorded gains, ``Family.chosen``; about a minute on 2 cores) or
``python -m bench.concessions --tune`` (the grid search again, then the report: about 3 minutes). The PID's recorded
gains are ``BudgetSettings``' defaults.
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

from vigil.actions.budget import WEEK_S, BudgetSettings, ConcessionBudget
from vigil.actions.controller import ControllerState

HOUR_S = 3600.0
DAYS = 56
STEP_DAY = 28
BUDGET_CENTS = 2_000_000
MEDIAN_BASE_CENTS = 1_500
SIGMA = 0.8
TOLERANCE = 0.10
TAIL_DAYS = 7
TENANT = "sim"
START = datetime(2026, 1, 5, tzinfo=UTC)
TUNE_SEEDS = (0, 1, 2)
TEST_SEEDS = tuple(range(100, 120))


def accept_probability(share: float) -> float:
    """The chance a customer accepts an offer of ``share`` of what the case merits."""
    return 0.55 + 0.4 * share


@dataclass(frozen=True, slots=True)
class Scenario:
    """Demand, as a multiple of the budget, from each segment's start day to the next's."""

    name: str
    segments: tuple[tuple[float, float], ...]
    budget_cents: int = BUDGET_CENTS
    tolerance: float = TOLERANCE

    def demand(self, day: float) -> float:
        """The demand level on ``day``."""
        return [level for start, level in self.segments if start <= day][-1]

    def bounds(self) -> list[tuple[int, int, float]]:
        """Each segment as (first hour, end hour, demand)."""
        starts = [int(s * 24) for s, _ in self.segments] + [DAYS * 24]
        return [(starts[i], starts[i + 1], lvl) for i, (_, lvl) in enumerate(self.segments)]


SCENARIOS = (
    Scenario("over 3x (cold start)", ((0, 3.0),)),
    Scenario("under 0.5x", ((0, 0.5),)),
    Scenario("step up 0.5x -> 2.5x", ((0, 0.5), (STEP_DAY, 2.5))),
    Scenario("step down 3x -> 1.5x", ((0, 3.0), (STEP_DAY, 1.5))),
    # A small tenant: its budget is about 97 full-size offers a week, so its week's spend is noisy on its own.
    Scenario("small tenant, step up 0.5x -> 2.5x", ((0, 0.5), (STEP_DAY, 2.5)), budget_cents=200_000, tolerance=0.3),
)


@dataclass(frozen=True, slots=True)
class Trace:
    """Hourly samples of one run: the window's spend against the budget, and the multiplier."""

    ratio: list[float]
    multiplier: list[float]


def simulate(scenario: Scenario, settings: BudgetSettings, seed: int) -> Trace:
    """One tenant through the scenario, its offers sized by ``ConcessionBudget`` with these settings."""
    rng = np.random.default_rng(seed)
    budget_cents = scenario.budget_cents
    settings = settings.model_copy(update={"budget_cents": budget_cents})
    budget = ConcessionBudget(settings)
    horizon_s = min(settings.horizon_s, settings.window_s)
    mean_base = MEDIAN_BASE_CENTS * math.exp(SIGMA**2 / 2)
    state = ControllerState()
    window: deque[tuple[datetime, int]] = deque()
    recent: deque[tuple[datetime, int]] = deque()
    window_sum = 0
    trace = Trace([], [])
    for hour in range(DAYS * 24):
        now = START + timedelta(hours=hour)
        window_sum -= _trim(window, now, settings.window_s)
        _trim(recent, now, horizon_s)
        state = budget.update(state, recent, TENANT, now)
        per_hour = scenario.demand(hour / 24) * budget_cents * HOUR_S / settings.window_s
        n = int(rng.poisson(per_hour / (mean_base * accept_probability(1.0))))
        offsets = np.sort(rng.uniform(0, HOUR_S, n))
        bases = rng.lognormal(math.log(MEDIAN_BASE_CENTS), SIGMA, n)
        draws = rng.random(n)
        for offset, base, draw in zip(offsets, bases, draws, strict=True):
            cents = max(1, round(float(base)))
            amount = budget.offer(cents, state).amount_cents
            if amount and draw < accept_probability(amount / cents):
                spend = (now + timedelta(seconds=float(offset)), amount)
                window.append(spend)
                recent.append(spend)
                window_sum += amount
        end = now + timedelta(hours=1)
        window_sum -= _trim(window, end, settings.window_s)
        trace.ratio.append(window_sum / budget_cents)
        trace.multiplier.append(state.multiplier)
    return trace


def _trim(spends: deque[tuple[datetime, int]], now: datetime, window_s: float) -> int:
    """Drop the spends that left the window ``(now - window_s, now]``; the cents dropped."""
    dropped = 0
    while spends and (now - spends[0][0]).total_seconds() >= window_s:
        dropped += spends.popleft()[1]
    return dropped


@dataclass(frozen=True, slots=True)
class Response:
    """How one above-budget segment went (see the module docstring)."""

    settle_days: float | None
    overshoot: float
    error: float
    swing: float
    crossings: int
    spread: float


def response(ratio: Sequence[float], multiplier: Sequence[float], tolerance: float = TOLERANCE) -> Response:
    """The segment's settling, overshoot, steady-state error, swing and crossings against r = 1, and the spread of
    its multiplier."""
    outside = [i for i, r in enumerate(ratio) if abs(r - 1) > tolerance]
    settled = 0 if not outside else outside[-1] + 1
    tail = ratio[-TAIL_DAYS * 24 :]
    return Response(
        settle_days=None if settled >= len(ratio) - 24 else settled / 24,
        overshoot=max(0.0, max(ratio) - 1),
        error=statistics.fmean(tail) - 1,
        swing=max(tail) - min(tail),
        crossings=_crossings(ratio[settled:], tolerance / 2),
        spread=_spread(multiplier[-TAIL_DAYS * 24 :]),
    )


def _spread(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[int(0.95 * (len(ordered) - 1))] - ordered[int(0.05 * (len(ordered) - 1))]


def _crossings(ratio: Sequence[float], band: float) -> int:
    side, count = 0, 0
    for r in ratio:
        now = 1 if r > 1 + band else -1 if r < 1 - band else 0
        if now and now != side:
            count += side != 0
            side = now
    return count


DAY_S = 24 * 3600.0
Gains = dict[str, float | bool]


def _grid(**axes: Sequence[float]) -> tuple[Gains, ...]:
    return tuple(dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values()))


@dataclass(frozen=True, slots=True)
class Family:
    """A kind of controller: the settings tuning chooses from, and the choice it made on ``TUNE_SEEDS`` (recorded)."""

    name: str
    grid: tuple[Gains, ...]
    chosen: Gains


FAMILIES = (
    Family("none (offers in full)", ({"enabled": False},), {"enabled": False}),
    Family(
        "integral only",
        _grid(kp=[0], kd=[0], ki=[0.02, 0.05, 0.1, 0.2, 0.5], horizon_s=[6 * 3600.0, DAY_S]),
        {"kp": 0, "kd": 0, "ki": 0.1, "horizon_s": 6 * 3600.0},
    ),
    Family(
        "PI",
        _grid(kp=[0.25, 0.5, 1, 2], kd=[0], ki=[0.02, 0.05, 0.1, 0.2], horizon_s=[6 * 3600.0, DAY_S]),
        {"kp": 0.25, "kd": 0, "ki": 0.1, "horizon_s": 6 * 3600.0},
    ),
    Family(
        "PID",
        _grid(kp=[0, 0.25, 0.5], ki=[0.05, 0.1, 0.2], kd=[0.5, 1, 2], horizon_s=[6 * 3600.0, DAY_S]),
        {"kp": 0.25, "ki": 0.1, "kd": 0.5, "horizon_s": 6 * 3600.0},
    ),
    Family(
        "PID on the window's sum",
        _grid(kp=[0.1, 0.5], ki=[0.002, 0.01], kd=[0.5, 2], horizon_s=[WEEK_S]),
        {"kp": 0.5, "ki": 0.01, "kd": 2, "horizon_s": WEEK_S},
    ),
)


def settings_for(gains: Gains) -> BudgetSettings:
    """``BudgetSettings`` with these gains (the rest defaults)."""
    return BudgetSettings().model_copy(update=gains)


def score(gains: Gains, seeds: Sequence[int]) -> float:
    """Tuning's loss, lower is better: per above-budget segment, settling in weeks + overshoot + 5 |error| + swing +
    crossings / 4 + spread / 4; per below-budget segment, twice the mean multiplier (cutting offers needlessly)."""
    losses = []
    for seed, scenario in itertools.product(seeds, SCENARIOS):
        trace = simulate(scenario, settings_for(gains), seed)
        for first, end, level in scenario.bounds():
            if level <= 1:
                losses.append(2 * statistics.fmean(trace.multiplier[first:end]))
                continue
            r = response(trace.ratio[first:end], trace.multiplier[first:end], scenario.tolerance)
            settle = (end - first) / 24 if r.settle_days is None else r.settle_days
            losses.append(settle / 7 + r.overshoot + 5 * abs(r.error) + r.swing + r.crossings / 4 + r.spread / 4)
    return statistics.fmean(losses)


def tune(family: Family, seeds: Sequence[int], pool: Executor) -> Gains:
    """The family's grid point with the least loss on ``seeds``."""
    losses = list(pool.map(score, family.grid, itertools.repeat(seeds)))
    return family.grid[losses.index(min(losses))]


@dataclass(frozen=True, slots=True)
class Row:
    """One family on one scenario's segment, over the test seeds."""

    family: str
    segment: str
    above: bool
    ratio: float
    settle_median: float | None
    never_settled: int
    overshoot: float
    overshoot_max: float
    error: float
    swing: float
    crossings: float
    crossings_max: int
    spread: float
    multiplier: float


def evaluate(family: str, gains: Gains, seeds: Sequence[int]) -> list[Row]:
    """Every scenario's segments, each over ``seeds``."""
    rows = []
    for scenario in SCENARIOS:
        traces = [simulate(scenario, settings_for(gains), seed) for seed in seeds]
        for first, end, level in scenario.bounds():
            label = f"{scenario.name}: {level:g}x" if len(scenario.segments) > 1 else scenario.name
            rows.append(_row(family, label, traces, first, end, scenario))
    return rows


def _row(family: str, label: str, traces: list[Trace], first: int, end: int, scenario: Scenario) -> Row:
    ratios = [t.ratio[first:end] for t in traces]
    responses = [response(r, t.multiplier[first:end], scenario.tolerance) for r, t in zip(ratios, traces, strict=True)]
    settled = [r.settle_days for r in responses if r.settle_days is not None]
    return Row(
        family=family,
        segment=label,
        above=scenario.demand(first / 24) > 1,
        ratio=statistics.fmean(statistics.fmean(r[-TAIL_DAYS * 24 :]) for r in ratios),
        settle_median=statistics.median(settled) if settled else None,
        never_settled=len(responses) - len(settled),
        overshoot=statistics.fmean(r.overshoot for r in responses),
        overshoot_max=max(r.overshoot for r in responses),
        error=statistics.fmean(abs(r.error) for r in responses),
        swing=statistics.fmean(r.swing for r in responses),
        crossings=statistics.fmean(r.crossings for r in responses),
        crossings_max=max(r.crossings for r in responses),
        spread=statistics.fmean(r.spread for r in responses),
        multiplier=statistics.fmean(statistics.fmean(t.multiplier[first:end]) for t in traces),
    )


HEADER = (
    "| controller | segment | r, last week | settling, days (median; never) | overshoot (mean; max) "
    "| steady-state error abs(r-1) | swing | crossings (mean; max) | multiplier p5-p95 | mean multiplier |\n"
    + "| --- " * 10
    + "|"
)


def markdown(rows: Sequence[Row]) -> str:
    """The rows as a markdown table; settling, overshoot, error and crossings only where demand is above budget."""
    lines = [HEADER]
    for r in rows:
        if r.above:
            settle = "-" if r.settle_median is None else f"{r.settle_median:.1f}"
            cells = [
                f"{settle}; {r.never_settled}",
                f"{r.overshoot:.3f}; {r.overshoot_max:.3f}",
                f"{r.error:.3f}",
                f"{r.swing:.3f}",
                f"{r.crossings:.2f}; {r.crossings_max}",
                f"{r.spread:.3f}",
            ]
        else:
            cells = ["", "", "", f"{r.swing:.3f}", "", f"{r.spread:.3f}"]
        lines.append(f"| {r.family} | {r.segment} | {r.ratio:.3f} | " + " | ".join(cells) + f" | {r.multiplier:.3f} |")
    return "\n".join(lines)


def describe(gains: Gains) -> str:
    """The gains as one short string."""
    if gains.get("enabled") is False:
        return "disabled"
    return ", ".join(f"{k}={v:g}" for k, v in gains.items())


def main(argv: Sequence[str] | None = None) -> int:
    """Take each family's recorded gains (or tune them again on the tune seeds with ``--tune``); report on the test
    seeds."""
    parser = argparse.ArgumentParser(prog="python -m bench.concessions", description=__doc__.split("\n")[0])
    parser.add_argument("--tune", action="store_true", help="tune each family's gains again (about 3 minutes)")
    parser.add_argument("--seeds", type=int, default=len(TEST_SEEDS), help="how many test seeds (from 100)")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    seeds = TEST_SEEDS[: args.seeds]
    with ProcessPoolExecutor(args.jobs) as pool:
        chosen = [tune(f, TUNE_SEEDS, pool) if args.tune and len(f.grid) > 1 else f.chosen for f in FAMILIES]
        for family, gains in zip(FAMILIES, chosen, strict=True):
            print(f"{family.name}: {describe(gains)}", flush=True)
        names = [f.name for f in FAMILIES]
        results = pool.map(evaluate, names, chosen, itertools.repeat(seeds))
        rows = [row for family_rows in results for row in family_rows]
    print(f"\ntune seeds {list(TUNE_SEEDS)}, test seeds {seeds[0]}..{seeds[-1]} ({len(seeds)})\n")
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
