"""The conjunctive-risk guard: blocks an action that completes a forbidden chain of allowed ones.

Each proposed action is checked against what is already done, pending or maybe done for the same customer
(``suggested``, ``approved``, ``executing``, ``in_doubt``, ``executed``; never ``rejected``, ``failed``, ``expired``,
``declined`` or ``blocked``), within each pattern's window and scope, using the patterns of ``risk.yaml``
(``vigil.actions.patterns``). A match names the pattern and the chain of records, the proposed one last, and
explains itself for an ``escalation`` suggestion.

The caller fetches the history (the customer's actions within ``Guard.window_s`` of the proposed one); the guard
reads no clock: "now" is the proposed action's ``at``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from vigil.actions.chains import Compiled, Reach, compile_pattern, search_aggregate, search_steps
from vigil.actions.patterns import Pattern, load_patterns

Status = Literal[
    "suggested", "approved", "executing", "in_doubt", "executed", "rejected", "failed", "expired", "blocked", "declined"
]
COUNTED: frozenset[str] = frozenset({"suggested", "approved", "executing", "in_doubt", "executed"})
"""What the guard counts: what is pending, and every status in which the action may have run (``in_doubt``: the
system's answer was lost, so it may have)."""
_EXPLAIN_MAX_STEPS = 12


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """An action as the guard sees it: proposed now, or in the customer's history.

    ``facts`` holds what the company's systems said when it was proposed (for a refund,
    ``payment_method_original``, ``payment_method_added_at``, ``order_total_cents``; for a cancellation,
    ``refunds_payment``; for a new payment method, ``payment_method_id`` once the system gave one).
    """

    action_id: str
    conversation_id: str
    customer_id: str
    tenant: str
    name: str
    arguments: Mapping[str, Any]
    status: Status
    at: datetime
    facts: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RiskMatch:
    """A pattern the proposed action completes: the records that matched, in time order, the proposed one last
    (for a chain: one per step; for an aggregate: every record counted), and for an aggregate what was passed."""

    pattern: Pattern
    chain: tuple[ActionRecord, ...]
    detail: str = ""

    def explain(self) -> str:
        """A short text for the escalation suggestion: the pattern, then each step with its conversation and time."""
        proposed = self.chain[-1]
        lines = [f"Blocked {proposed.name}: it completes the risk pattern {self.pattern.name!r}."]
        lines.append(self.pattern.description)
        if self.detail:
            lines.append(self.detail)
        shown = self.chain[-_EXPLAIN_MAX_STEPS:]
        if len(shown) < len(self.chain):
            lines.append(f"(and {len(self.chain) - len(shown)} earlier actions)")
        first = len(self.chain) - len(shown) + 1
        lines += [f"{n}. {_describe(r, r is proposed)}" for n, r in enumerate(shown, start=first)]
        return "\n".join(lines)


def _describe(record: ActionRecord, proposed: bool) -> str:
    arguments = ", ".join(
        f"{key}={_short(value)}" for key, value in record.arguments.items() if key not in ("customer_id", "reason")
    )
    status = "proposed now" if proposed else record.status
    when = record.at.strftime("%Y-%m-%d %H:%M %Z").strip()
    return f"{record.name}({arguments}) in conversation {record.conversation_id} at {when}, {status}"


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 40 else text[:39] + "…"


class Guard:
    """Checks proposed actions against the patterns, in the order written; the first match wins."""

    def __init__(self, patterns: Sequence[Pattern]) -> None:
        self.patterns = tuple(patterns)
        self._compiled = tuple(compile_pattern(p) for p in self.patterns)
        self._names = frozenset(name for p in self.patterns for name in p.actions)
        self.window_s = max((p.window_s for p in self.patterns), default=0.0)

    @classmethod
    def from_file(cls, path: Path, actions: Collection[str] | None = None) -> Guard:
        """Load the patterns of ``path`` (see ``vigil.actions.patterns``).

        Args:
            path: the rulebook's ``risk.yaml``.
            actions: the catalog's action names; a pattern naming another action is then a load error.

        Raises:
            RiskPatternError: the file is unreadable or a pattern invalid (the message names pattern and field).
        """
        return cls(load_patterns(path, actions))

    def check(self, proposed: ActionRecord, history: Sequence[ActionRecord]) -> RiskMatch | None:
        """The first pattern that ``proposed`` completes given ``history``, or None to let it through.

        ``history`` is the customer's actions (any order, any status; only those done or pending count, and a record
        with the proposed one's ``action_id`` is ignored). Records of other customers or tenants are ignored too.
        """
        if proposed.name not in self._names:
            return None
        records = self._relevant(proposed, history)
        by_name: dict[str, list[int]] = defaultdict(list)
        for index, record in enumerate(records):
            by_name[record.name].append(index)
        for compiled in self._compiled:
            if proposed.name not in compiled.pattern.actions:
                continue
            found = _search(compiled, proposed, records, by_name)
            if found is not None:
                return found
        return None

    def _relevant(self, proposed: ActionRecord, history: Sequence[ActionRecord]) -> list[ActionRecord]:
        horizon = proposed.at - timedelta(seconds=self.window_s)
        kept = [
            r
            for r in history
            if r.status in COUNTED
            and r.at >= horizon
            and r.name in self._names
            and r.customer_id == proposed.customer_id
            and r.tenant == proposed.tenant
            and r.action_id != proposed.action_id
        ]
        kept.sort(key=lambda r: r.at)
        return kept


def _search(
    compiled: Compiled, proposed: ActionRecord, records: list[ActionRecord], by_name: Mapping[str, list[int]]
) -> RiskMatch | None:
    pattern = compiled.pattern
    horizon = proposed.at - timedelta(seconds=pattern.window_s)
    start = bisect_left(records, horizon, key=lambda r: r.at)
    reach = Reach(start, proposed.conversation_id if pattern.scope == "case" else None)
    if pattern.aggregate is not None:
        found = search_aggregate(compiled, proposed, records, by_name, reach)
        return None if found is None else RiskMatch(pattern, found[0], found[1])
    chain = search_steps(compiled, proposed, records, by_name, reach)
    return None if chain is None else RiskMatch(pattern, chain)
