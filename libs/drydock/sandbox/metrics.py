"""Sandboxes as Prometheus metrics, on the process registry served at ``/metrics``: how long a
provider takes to create one, and how often a thread got none. Labelled by provider only."""

from prometheus_client import Counter, Histogram

from drydock.telemetry import REGISTRY

CREATE_SECONDS = Histogram(
    "drydock_sandbox_create_seconds",
    "Time for the provider to create a thread's sandbox and see it healthy (a warm pod's claim included).",
    ["provider"],
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300),
    registry=REGISTRY,
)
FAILURES = Counter(
    "drydock_sandbox_failures",
    "Times a thread asked for its sandbox and none could be provided (created, reconnected or restored).",
    ["provider"],
    registry=REGISTRY,
)
