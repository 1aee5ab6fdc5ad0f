"""What an LLM path costs and how it goes: requests by outcome, tokens, spend and latency, on the daemon's registry.

Each capability that uses the LLM registers its own set under its own prefix (drafting ``vigil_llm_*``, the miner
``vigil_miner_llm_*``), so a dashboard tells a live draft's budget from a batch job's.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram

DRAFT_BUCKETS = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 10.0)
"""Seconds, around the drafting budget (``VIGIL_LLM__TIMEOUT_S``, 3 s by default)."""


class LlmMetrics:
    """What one use of the LLM costs and how it goes.

    Args:
        registry: where to register them.
        prefix: the metrics' names start with it (``vigil_llm``: ``vigil_llm_requests_total``...).
        use: what the requests do, for the help texts ("drafting", "rewriting").
        buckets: the latency histogram's buckets, in seconds, to fit the use's budget.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        prefix: str = "vigil_llm",
        use: str = "drafting",
        buckets: Sequence[float] = DRAFT_BUCKETS,
    ) -> None:
        self.registry = registry
        self.requests = Counter(
            f"{prefix}_requests",
            f"LLM {use} requests, by outcome (ok, timeout, rate_limited, server_error, unusable, ungrounded, error).",
            ["outcome"],
            registry=registry,
        )
        self.tokens = Counter(
            f"{prefix}_tokens",
            "Tokens billed by the LLM, by direction (input, output).",
            ["direction"],
            registry=registry,
        )
        self.cost = Counter(
            f"{prefix}_cost_usd",
            "Estimated LLM spend in US dollars (from the configured prices).",
            registry=registry,
        )
        self.latency = Histogram(
            f"{prefix}_request_seconds",
            f"Duration of LLM {use} requests, whatever their outcome.",
            buckets=tuple(buckets),
            registry=registry,
        )
