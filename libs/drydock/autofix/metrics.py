"""Autofix's Prometheus metrics, on the process registry served at ``/metrics``."""

from prometheus_client import Counter, Histogram

from drydock.telemetry import REGISTRY

EVENTS = Counter(
    "drydock_autofix_events",
    "Events on drydock.github.* read by the autofix controller, by what they were (observed, ignored, failed).",
    ["outcome"],
    registry=REGISTRY,
)
DECISIONS = Counter(
    "drydock_autofix_decisions",
    "Autofix decisions, by outcome (dispatch, skip, coalesce, stop) and rule.",
    ["outcome", "rule"],
    registry=REGISTRY,
)
DECISION_SECONDS = Histogram(
    "drydock_autofix_decision_seconds",
    "Time to decide one event, from reading it to the decision being recorded.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    registry=REGISTRY,
)
