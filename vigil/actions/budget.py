"""The concession budget: how generous a goodwill offer (a credit, a voucher, a partial refund) may be, so that a
tenant's goodwill spend stays inside its rolling budget.

The caller says what a case merits (``base_cents``); the budget scales it down as the controller's multiplier
``lambda`` grows. Let ``x`` in [0, 1] be the share of the base that is offered. The customer's satisfaction has
diminishing returns, ``u(x) = x - x**2 / 2`` (the last cent of the full amount adds nothing more), and the offer
costs ``lambda * x``. The offer maximises ``u(x) - lambda * x``: ``x* = 1 - lambda``, clipped to [0, 1]. That is
the *generosity*; it falls linearly from 1 at ``lambda = 0`` to 0 at ``lambda = 1``, the controller's ceiling, so the
loop's gain from multiplier to spend is the same at every level.

The cost the controller reads is the spend *rate* over the last ``horizon_s`` against the budget's rate,
``(spend over horizon_s) / (budget_cents * horizon_s / window_s)``, with limit 1. It is normalised so that one set
of gains serves a tenant of 100.00 a week and one of 100,000.00. The rate is measured over a horizon shorter than
the budget's window because the window's own sum answers late: after a step in demand it takes a whole window to
show it fully, and a loop closed through that delay either reacts slowly or rings with the window's period (the
``window`` controller in ``bench.concessions`` measures this). Holding the rate at the budget's rate holds the
window's sum at the budget once a window has passed. With ``horizon_s = window_s`` the cost is the window's sum
against the budget.

Amounts are integers in cents. An offer is rounded down to a whole cent, so it is never above the base; a
scaled-down offer below ``min_offer_cents`` is not made at all (a 0.03 credit reads as an insult), while a small base
offered in full still is.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from prometheus_client import CollectorRegistry, Gauge
from pydantic import BaseModel, Field

from vigil.actions.controller import ControllerState, PidLagrangian

ANY = "*"
"""In ``BudgetSettings.budgets_cents``: every tenant not named."""

WEEK_S = 7 * 24 * 3600.0


class BudgetSettings(BaseModel):
    """The concession budget: the rolling budget per tenant, how spend is measured, and the controller's gains.

    The default horizon and gains are those ``python -m bench.concessions --tune`` chose in simulation (see
    docs/evaluation.md, "Concession budget: the controller in simulation"); the gains are per step of ``period_s``.
    """

    enabled: bool = Field(default=True, description="Scale goodwill offers to keep spend inside the budget.")
    budget_cents: int = Field(default=100_000, ge=0, description="Goodwill each tenant may spend per window, cents.")
    budgets_cents: dict[str, int] = Field(
        default_factory=dict,
        description='Per-tenant budgets in cents per window, overriding budget_cents; "*" for every tenant not named.',
    )
    window_s: float = Field(default=WEEK_S, gt=0, description="The rolling window the budget is for.")
    horizon_s: float = Field(
        default=6 * 3600.0, gt=0, description="How far back the spend rate is measured (at most window_s)."
    )
    period_s: float = Field(default=3600.0, gt=0, description="The least time between two steps of the controller.")
    kp: float = Field(default=0.25, ge=0, description="The controller's proportional gain (per step).")
    ki: float = Field(default=0.1, ge=0, description="The controller's integral gain (per step).")
    kd: float = Field(default=0.5, ge=0, description="The controller's derivative gain (per step).")
    min_offer_cents: int = Field(
        default=100, ge=0, description="A scaled-down offer below this is not made (a full small offer still is)."
    )

    def budget_for(self, tenant: str) -> int:
        """The tenant's budget per window, in cents."""
        return self.budgets_cents.get(tenant, self.budgets_cents.get(ANY, self.budget_cents))

    def controller(self) -> PidLagrangian:
        """The controller these settings' gains make."""
        return PidLagrangian(kp=self.kp, ki=self.ki, kd=self.kd, period_s=self.period_s, multiplier_max=1.0)


@dataclass(frozen=True, slots=True)
class Offer:
    """What to offer: ``amount_cents`` (0: offer nothing), the multiplier it came from, and the share of the base."""

    amount_cents: int
    multiplier: float
    generosity: float


def rolling_spend(spends: Iterable[tuple[datetime, int]], now: datetime, window_s: float) -> int:
    """The cents spent in the window ``(now - window_s, now]``, from ``(at, cents)`` pairs (aware times)."""
    total = 0
    for at, cents in spends:
        age = (now - at).total_seconds()
        if 0 <= age < window_s:
            total += cents
    return total


def generosity(multiplier: float) -> float:
    """The share of the base to offer at this multiplier: the maximiser of ``x - x**2/2 - multiplier * x`` on [0, 1]."""
    return min(max(1.0 - multiplier, 0.0), 1.0)


class ConcessionBudget:
    """The budget's logic for every tenant: measure spend, step the controller, size an offer.

    Pure: the caller stores each tenant's ``ControllerState`` and feeds in the spends (the goodwill given).
    """

    def __init__(self, settings: BudgetSettings) -> None:
        self.settings = settings
        self.controller = settings.controller()

    def cost(self, spends: Iterable[tuple[datetime, int]], tenant: str, now: datetime) -> float:
        """The spend rate over the horizon against the budget's rate (1.0: on budget; see the module docstring)."""
        horizon_s = min(self.settings.horizon_s, self.settings.window_s)
        target = self.settings.budget_for(tenant) * horizon_s / self.settings.window_s
        spent = rolling_spend(spends, now, horizon_s)
        if target <= 0:
            # A zero budget: any spend is infinitely over; report a large finite overrun so the multiplier saturates.
            return 1.0 if spent == 0 else 1e6
        return spent / target

    def update(
        self, state: ControllerState, spends: Iterable[tuple[datetime, int]], tenant: str, now: datetime
    ) -> ControllerState:
        """The tenant's controller state after a step at ``now`` (unchanged if a step is not due, or when disabled)."""
        if not self.settings.enabled:
            return state
        return self.controller.update(state, self.cost(spends, tenant, now), 1.0, now)

    def offer(self, base_cents: int, state: ControllerState) -> Offer:
        """The offer for a case meriting ``base_cents``: never above it, never negative, in whole cents."""
        base = max(base_cents, 0)
        if not self.settings.enabled:
            return Offer(amount_cents=base, multiplier=0.0, generosity=1.0)
        share = generosity(state.multiplier)
        amount = min(base, max(0, math.floor(base * share)))
        if amount < base and amount < self.settings.min_offer_cents:
            amount = 0
        return Offer(amount_cents=amount, multiplier=state.multiplier, generosity=share)


class BudgetMetrics:
    """The budget's gauges, per tenant: goodwill spent in the window, the budget, and the controller's multiplier."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.spend = Gauge(
            "vigil_concession_spend_cents",
            "Goodwill spent in the rolling window, in cents, by tenant.",
            ["tenant"],
            registry=registry,
        )
        self.budget = Gauge(
            "vigil_concession_budget_cents",
            "The rolling window's goodwill budget, in cents, by tenant.",
            ["tenant"],
            registry=registry,
        )
        self.multiplier = Gauge(
            "vigil_concession_multiplier",
            "The concession controller's multiplier (0: offers in full; 1: nothing scaled down is offered), by tenant.",
            ["tenant"],
            registry=registry,
        )

    def record(self, tenant: str, spend_cents: int, budget_cents: int, multiplier: float) -> None:
        """Set the tenant's three gauges."""
        self.spend.labels(tenant=tenant).set(spend_cents)
        self.budget.labels(tenant=tenant).set(budget_cents)
        self.multiplier.labels(tenant=tenant).set(multiplier)
