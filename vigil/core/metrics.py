"""The platform's Prometheus metrics, on a registry the daemon passes in (never the global one).

A capability's own metrics live in its package and are registered on the same registry by its ``setup`` (the LLM
paths' in ``vigil.llm.metrics``, one set per capability that uses the LLM).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_FAST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """The metrics of the event flow: events, dead letters, suggestions, feedback, retries, latency, readiness."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.events_consumed = Counter(
            "vigil_events_consumed", "Valid events read from a source, by type.", ["type"], registry=registry
        )
        self.events_duplicate = Counter(
            "vigil_events_duplicate",
            "Events already stored (re-delivered or re-sent), by type.",
            ["type"],
            registry=registry,
        )
        self.events_dead_lettered = Counter(
            "vigil_events_dead_lettered",
            "Records sent to the dead-letter destination, by reason.",
            ["reason"],
            registry=registry,
        )
        self.dead_letter_failures = Counter(
            "vigil_dead_letter_failures",
            "Rejected records that could not be dead-lettered (refused, or failing after every attempt) and were "
            "skipped, by the reason they were rejected.",
            ["reason"],
            registry=registry,
        )
        self.events_let_go = Counter(
            "vigil_events_let_go",
            "Records left unfinished to the consumer their partition moved to, by how vigil learned it moved: "
            "withdrawn (handed over at a rebalance while still in flight), fenced (a write refused: a later tenure "
            "of the partition existed).",
            ["how"],
            registry=registry,
        )
        self.mqtt_dropped = Counter(
            "vigil_mqtt_dropped",
            "QoS 0 MQTT messages dropped because vigil already held its maximum of them, by where "
            "(client_queue_full, inbox_full).",
            ["reason"],
            registry=registry,
        )
        self.suggestions_published = Counter(
            "vigil_suggestions_published", "Suggestions published, by kind.", ["kind"], registry=registry
        )
        self.suggestions_suppressed = Counter(
            "vigil_suggestions_suppressed", "Proposals the gate kept quiet, by reason.", ["reason"], registry=registry
        )
        self.feedback = Counter(
            "vigil_feedback",
            "Analysts' verdicts on suggestions, by the suggestion's kind and the verdict.",
            ["kind", "verdict"],
            registry=registry,
        )
        self.skill_failures = Counter(
            "vigil_skill_failures", "Skills that raised while proposing, by skill.", ["skill"], registry=registry
        )
        self.retries = Counter(
            "vigil_retries",
            "Operations retried after a transient failure, by dependency.",
            ["dependency"],
            registry=registry,
        )
        self.suggestion_latency = Histogram(
            "vigil_suggestion_latency_seconds",
            "From event received to suggestion published.",
            buckets=_FAST_BUCKETS,
            registry=registry,
        )
        self.event_processing = Histogram(
            "vigil_event_processing_seconds",
            "From record received to fully handled (stored, published, acked).",
            buckets=_FAST_BUCKETS,
            registry=registry,
        )
        self.loop_lag = Histogram(
            "vigil_event_loop_lag_seconds",
            "How late the event loop woke a task that sleeps a fixed interval: how long it was held by other work.",
            buckets=_LAG_BUCKETS,
            registry=registry,
        )
        self.loop_lag_max = Gauge(
            "vigil_event_loop_lag_max_seconds",
            "The largest event-loop lag since the process started.",
            registry=registry,
        )
        self.in_flight = Gauge("vigil_events_in_flight", "Records being processed now.", registry=registry)
        self.consumer_lag = Gauge(
            "vigil_consumer_lag_records",
            "Records of an input partition this replica holds that are not done yet: the partition's high-water mark "
            "(as of the last fetch) minus the next offset to commit. Summed over replicas: the group's backlog.",
            ["topic", "partition"],
            registry=registry,
        )
        self.ready = Gauge(
            "vigil_dependency_up",
            "Whether a dependency answered its last health check.",
            ["dependency"],
            registry=registry,
        )
