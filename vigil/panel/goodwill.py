"""Goodwill spend against the concession budget, per tenant, as the lead's overview shows it.

The budget is the actions capability's, which the panel may not import (capabilities are independent). The seam is
one callable, ``GoodwillBudgets``: given the tenants a lead sees (None: all), it answers each one's standing, any
object with the attributes of ``GoodwillBudget``. The composition root (``vigil/app/compose.py``) passes the actions
capability's reader (``vigil.actions.standings.BudgetStandings``); without actions there is none, and the overview
leaves the section out.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from vigil.panel.display import UTC_DISPLAY, Display, Displays
from vigil.panel.progress import duration


class GoodwillBudget(Protocol):
    """One tenant's goodwill against its budget, as the budget's reader gives it."""

    @property
    def tenant(self) -> str: ...
    @property
    def spent_cents(self) -> int: ...
    @property
    def budget_cents(self) -> int: ...
    @property
    def window_s(self) -> float: ...
    @property
    def multiplier(self) -> float | None: ...
    @property
    def generosity(self) -> float | None: ...


GoodwillBudgets = Callable[[Sequence[str] | None], Awaitable[Sequence[GoodwillBudget]]]
"""Each tenant's standing, for the tenants given (None: every tenant the budget knows)."""


@dataclass(frozen=True, slots=True)
class BudgetLine:
    """A tenant's line on the overview: the spend as a share of the budget, and the numbers behind it."""

    tenant: str
    spent: str
    """Money for people, in the tenant's currency: "£123.45"."""
    budget: str
    window: str
    """The rolling window in words: "7 days"."""
    spent_cents: int
    budget_cents: int
    share: str
    """"12%" of the budget; "over budget" past it; "—" for a zero budget."""
    over: bool
    multiplier: str | None
    """"0.18", with what it means said next to it on the page; None when the budget is off."""
    generosity: str | None
    """The share of what a case merits that is offered at this multiplier: "82%"."""


def budget_lines(standings: Sequence[GoodwillBudget], displays: Displays | None = None) -> list[BudgetLine]:
    """The overview's lines, by tenant, each in its tenant's money (``displays``; None: none named)."""
    shown = displays or Displays()
    return [line_of(s, shown.of(s.tenant)) for s in sorted(standings, key=lambda s: s.tenant)]


def line_of(s: GoodwillBudget, display: Display = UTC_DISPLAY) -> BudgetLine:
    """One tenant's line."""
    over = s.spent_cents > s.budget_cents
    share = "—" if s.budget_cents <= 0 else f"{s.spent_cents / s.budget_cents:.0%}"
    return BudgetLine(
        tenant=s.tenant,
        spent=display.money(s.spent_cents),
        budget=display.money(s.budget_cents),
        window=window_words(s.window_s),
        spent_cents=s.spent_cents,
        budget_cents=s.budget_cents,
        share=share,
        over=over,
        multiplier=f"{s.multiplier:.2f}" if s.multiplier is not None else None,
        generosity=f"{s.generosity:.0%}" if s.generosity is not None else None,
    )


def window_words(seconds: float) -> str:
    """A budget's window for people: "7 days", "1 day", "12 hours", else as a countdown writes it ("1h 30m")."""
    for unit, name in ((86400, "day"), (3600, "hour")):
        n, rest = divmod(seconds, unit)
        if n >= 1 and rest == 0:
            return f"{n:.0f} {name}{'s' if n != 1 else ''}"
    return duration(seconds)
