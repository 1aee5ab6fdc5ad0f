"""The concession budget against the store: each tenant's controller state kept in SQL (so every replica steps
the same controller), stepped from the goodwill given (executed, or approved and maybe run: an in-doubt credit may
have been paid, ``vigil.cases.actions.MAY_HAVE_RUN``), and asked for each goodwill offer.

A step is written with compare-and-swap on the state's ``updated_at``: two replicas stepping at once leave one
step, never two.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vigil.actions.budget import BudgetMetrics, ConcessionBudget, rolling_spend
from vigil.actions.controller import ControllerState
from vigil.actions.reading import Found
from vigil.actions.tables import CONCESSION
from vigil.cases import actions as stored
from vigil.core.clock import Clock
from vigil.db.engine import guarded, upsert


class Concessions:
    """Goodwill offers sized by each tenant's concession controller."""

    def __init__(
        self,
        budget: ConcessionBudget,
        engine: AsyncEngine,
        *,
        clock: Clock,
        metrics: BudgetMetrics,
        timeout_s: float | None,
    ) -> None:
        self._budget = budget
        self._engine = engine
        self._clock = clock
        self._metrics = metrics
        self._timeout_s = timeout_s

    async def offer(self, tenant: str, base_cents: int) -> Found | None:
        """The goodwill to offer a case of ``tenant`` meriting ``base_cents``, with where the amount came from;
        None when the budget offers nothing."""
        state = await self.step(tenant)
        offer = self._budget.offer(base_cents, state)
        if offer.amount_cents <= 0:
            return None
        detail = (
            f"{base_cents} cents merited, {offer.generosity:.0%} offered: the concession controller's multiplier is "
            f"{offer.multiplier:.2f}"
        )
        return Found(
            offer.amount_cents, {"source": "budget", "detail": detail, "multiplier": round(offer.multiplier, 4)}
        )

    async def step(self, tenant: str) -> ControllerState:
        """Step the tenant's controller if a step is due, store it, and set the budget's gauges."""
        settings = self._budget.settings
        now = self._clock.now()
        since = now - timedelta(seconds=max(settings.window_s, settings.horizon_s))
        async with guarded(self._engine, timeout_s=self._timeout_s, begin=True) as conn:
            spends = await stored.spends(conn, tenant, since=since)
            row = (await conn.execute(sa.select(CONCESSION).where(CONCESSION.c.tenant == tenant))).first()
            state = ControllerState.from_dict(row.state) if row is not None else ControllerState()
            stepped = self._budget.update(state, spends, tenant, now)
            if stepped is not state:
                await _save(conn, tenant, stepped, was=row.updated_at if row is not None else None, now=now)
        spent = rolling_spend(spends, now, settings.window_s)
        self._metrics.record(tenant, spent, settings.budget_for(tenant), stepped.multiplier)
        return stepped


async def _save(
    conn: AsyncConnection, tenant: str, state: ControllerState, *, was: datetime | None, now: datetime
) -> None:
    if was is None:
        insert = upsert(conn, CONCESSION).values(tenant=tenant, state=state.to_dict(), updated_at=now)
        await conn.execute(insert.on_conflict_do_nothing())
        return
    await conn.execute(
        sa.update(CONCESSION)
        .where(CONCESSION.c.tenant == tenant, CONCESSION.c.updated_at == was)
        .values(state=state.to_dict(), updated_at=now)
    )
