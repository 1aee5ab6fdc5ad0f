"""Where each tenant's concession budget stands, for people: the goodwill given in the rolling window (executed, or
approved and maybe run: ``vigil.cases.actions.MAY_HAVE_RUN``), the budget, and the controller's multiplier as last
stored. The lead's overview shows it.

The panel may not import this package (capabilities are independent), so the composition root hands it a
``BudgetStandings`` as a plain callable; each ``Standing`` has the attributes the panel's ``GoodwillBudget`` protocol
names, so neither side imports the other. Reading never steps the controller: the multiplier is the one the last
offer was sized with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from vigil.actions.budget import ANY, BudgetSettings, generosity, rolling_spend
from vigil.actions.controller import ControllerState
from vigil.actions.tables import CONCESSION
from vigil.cases import actions as stored
from vigil.core.clock import Clock
from vigil.db.engine import guarded


@dataclass(frozen=True, slots=True)
class Standing:
    """One tenant's goodwill against its budget."""

    tenant: str
    spent_cents: int
    """Goodwill given in the window that ends now (executed, or approved and maybe run)."""
    budget_cents: int
    window_s: float
    multiplier: float | None
    """The controller's multiplier (0: offers in full; 1: only small offers in full); None when the budget is off."""
    generosity: float | None
    """The share of what a case merits that is offered at this multiplier; None when the budget is off."""


class BudgetStandings:
    """Reads each tenant's ``Standing``: ``await standings(["acme"])``, or ``None`` for every tenant known to the
    budget (a stored controller, or a budget of its own)."""

    def __init__(self, settings: BudgetSettings, engine: AsyncEngine, *, clock: Clock, timeout_s: float | None) -> None:
        self._settings = settings
        self._engine = engine
        self._clock = clock
        self._timeout_s = timeout_s

    async def __call__(self, tenants: Sequence[str] | None) -> list[Standing]:
        """The standing of each of ``tenants`` (None: every tenant known to the budget), by tenant name."""
        s = self._settings
        now = self._clock.now()
        since = now - timedelta(seconds=s.window_s)
        async with guarded(self._engine, timeout_s=self._timeout_s, begin=False) as conn:
            stmt = sa.select(CONCESSION.c.tenant, CONCESSION.c.state)
            if tenants is not None:
                stmt = stmt.where(CONCESSION.c.tenant.in_(list(tenants)))
            states = {row.tenant: ControllerState.from_dict(row.state) for row in await conn.execute(stmt)}
            named = [t for t in s.budgets_cents if t != ANY]
            shown = sorted(set(tenants) if tenants is not None else {*states, *named})
            spends = {t: await stored.spends(conn, t, since=since) for t in shown}
        return [self._standing(t, states.get(t, ControllerState()), spends[t], now) for t in shown]

    def _standing(
        self, tenant: str, state: ControllerState, spends: list[tuple[datetime, int]], now: datetime
    ) -> Standing:
        s = self._settings
        return Standing(
            tenant=tenant,
            spent_cents=rolling_spend(spends, now, s.window_s),
            budget_cents=s.budget_for(tenant),
            window_s=s.window_s,
            multiplier=state.multiplier if s.enabled else None,
            generosity=generosity(state.multiplier) if s.enabled else None,
        )
