"""The PID-Lagrangian controller: a multiplier that rises while a cost runs over its limit and falls when it does not.

This is the Lagrange-multiplier update of Stooke, Achiam & Abbeel, "Responsive Safety in Reinforcement Learning by
PID Lagrangian Methods" (ICML 2020), Algorithm 2, which InteractCS-RL uses as its cost controller. Here it is a
control loop on its own, with no training: each update reads a measured cost ``J`` against a limit ``d`` and sets

    e = J - d
    I = clamp(I + e, 0, lambda_max / Ki)           (the integral; Stooke's max(0, .) and an upper clamp)
    D = max(0, e - e_prev)                          (only a rising cost pushes; a falling one is left to P and I)
    lambda = clamp(Kp * e + Ki * I + Kd * D, 0, lambda_max)

Anti-windup: the integral never goes below zero (a long stretch under the limit does not bank credit that would let
the cost overrun later) and never above ``lambda_max / Ki`` (the integral alone can hold the multiplier at its top,
and no further: once the offers are already at nothing, more error would only have to be unwound later).

The state is a frozen dataclass of plain numbers and a time, so that it can be stored per tenant in SQL and shared by
several replicas. ``update`` applies at most once per ``period_s``: the gains are per step, so the loop behaves the
same however often callers ask, and a replica that calls too soon (or with a clock behind the stored state) gets the
stored state back unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class ControllerState:
    """Where the controller stands: its multiplier, integral and last error, and when it last stepped.

    ``previous_error`` and ``updated_at`` are None before the first step (then there is no derivative, and the first
    update always applies).
    """

    multiplier: float = 0.0
    integral: float = 0.0
    previous_error: float | None = None
    updated_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        """The state as JSON-ready values (the time as ISO 8601)."""
        return {
            "multiplier": self.multiplier,
            "integral": self.integral,
            "previous_error": self.previous_error,
            "updated_at": None if self.updated_at is None else self.updated_at.isoformat(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ControllerState:
        """The state ``to_dict`` wrote."""
        at = data.get("updated_at")
        previous = data.get("previous_error")
        return cls(
            multiplier=float(data.get("multiplier", 0.0)),
            integral=float(data.get("integral", 0.0)),
            previous_error=None if previous is None else float(previous),
            updated_at=None if at is None else datetime.fromisoformat(at),
        )


@dataclass(frozen=True, slots=True)
class PidLagrangian:
    """The gains, the step period and the multiplier's ceiling; the state is passed in and returned.

    Args:
        kp: proportional gain, on the error now.
        ki: integral gain, on the sum of errors over steps.
        kd: derivative gain, on the error's rise since the last step.
        period_s: the least time between two steps.
        multiplier_max: the multiplier's ceiling (where the offers reach nothing, see ``vigil.actions.budget``).
    """

    kp: float
    ki: float
    kd: float
    period_s: float = 3600.0
    multiplier_max: float = 1.0

    def update(self, state: ControllerState, cost: float, limit: float, now: datetime) -> ControllerState:
        """One step on the cost measured at ``now`` (an aware time); the state unchanged if a step is not due."""
        if state.updated_at is not None and (now - state.updated_at).total_seconds() < self.period_s:
            return state
        error = cost - limit
        integral = min(max(state.integral + error, 0.0), self._integral_max())
        rise = 0.0 if state.previous_error is None else max(0.0, error - state.previous_error)
        raw = self.kp * error + self.ki * integral + self.kd * rise
        return ControllerState(
            multiplier=min(max(raw, 0.0), self.multiplier_max),
            integral=integral,
            previous_error=error,
            updated_at=now,
        )

    def _integral_max(self) -> float:
        # Without an integral term the integral is never used; keep it at zero rather than unbounded.
        return self.multiplier_max / self.ki if self.ki > 0 else 0.0
