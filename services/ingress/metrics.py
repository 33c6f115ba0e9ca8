"""The ingress's Prometheus metrics (names: ``drydock_ingress_*``)."""

from prometheus_client import Counter, Histogram

from drydock.telemetry import REGISTRY

DELIVERIES = Counter(
    "drydock_ingress_deliveries",
    "Webhook deliveries by channel and outcome (accepted, duplicate, ignored, rejected_*, unavailable).",
    ["channel", "outcome"],
    registry=REGISTRY,
)
DURATION = Histogram(
    "drydock_ingress_request_seconds",
    "Time to answer a webhook delivery, by channel.",
    ["channel"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    registry=REGISTRY,
)
ROUTED = Counter(
    "drydock_ingress_routed",
    "Inbox messages published by the ingress, by channel, role and trigger.",
    ["channel", "role", "trigger"],
    registry=REGISTRY,
)
NOTIFICATIONS = Counter(
    "drydock_ingress_notifications",
    "Pickup acknowledgements and replies sent after answering, by channel and result.",
    ["channel", "result"],
    registry=REGISTRY,
)
