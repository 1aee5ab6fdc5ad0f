"""The answers capability's metrics: LLM drafting requests, tokens, spend and latency, on the daemon's registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

_LLM_BUCKETS = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 10.0)


class LlmMetrics:
    """What drafting with the LLM costs and how it goes."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.requests = Counter(
            "vigil_llm_requests",
            "LLM drafting requests, by outcome (ok, timeout, rate_limited, server_error, unusable, ungrounded, error).",
            ["outcome"],
            registry=registry,
        )
        self.tokens = Counter(
            "vigil_llm_tokens",
            "Tokens billed by the LLM, by direction (input, output).",
            ["direction"],
            registry=registry,
        )
        self.cost = Counter(
            "vigil_llm_cost_usd", "Estimated LLM spend in US dollars (from the configured prices).", registry=registry
        )
        self.latency = Histogram(
            "vigil_llm_request_seconds",
            "Duration of LLM drafting requests, whatever their outcome.",
            buckets=_LLM_BUCKETS,
            registry=registry,
        )
