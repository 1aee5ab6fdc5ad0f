"""The actions' metrics: what was suggested and with which verdict, what the guard blocked, the decisions taken and
refused, how executions ended, and what the reconciler settled."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class ActionMetrics:
    """Counters of the actions' life, on the platform's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.suggested = Counter(
            "vigil_actions_suggested",
            "Actions suggested, by action and status (suggested, declined by the policy, blocked by the guard).",
            ["action", "status"],
            registry=registry,
        )
        self.blocked = Counter(
            "vigil_actions_blocked",
            "Actions the conjunctive-risk guard blocked, by the pattern they completed.",
            ["pattern"],
            registry=registry,
        )
        self.decided = Counter(
            "vigil_action_decisions",
            "Approvals and rejections taken, by verdict.",
            ["verdict"],
            registry=registry,
        )
        self.refused = Counter(
            "vigil_action_decisions_refused",
            "Approvals and rejections refused, by reason (not_permitted, arguments_changed, expired, not_open, "
            "not_runnable, unknown_action).",
            ["reason"],
            registry=registry,
        )
        self.executed = Counter(
            "vigil_action_executions",
            "Actions run on the company's systems, by action and outcome (executed, failed, in_doubt).",
            ["action", "outcome"],
            registry=registry,
        )
        self.expired = Counter(
            "vigil_actions_expired", "Suggested actions that expired before anyone approved them.", registry=registry
        )
        self.reconciled = Counter(
            "vigil_actions_reconciled",
            "Actions the reconciler took over and sent again, by the status it found (approved, executing, in_doubt) "
            "and the one it left (executed, failed, in_doubt, executing).",
            ["was", "now"],
            registry=registry,
        )
        self.in_doubt = Gauge(
            "vigil_actions_in_doubt",
            "Actions whose outcome is unknown (the system may have made the change), as the reconciler last counted.",
            registry=registry,
        )
