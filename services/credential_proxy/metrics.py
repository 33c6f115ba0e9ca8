"""The proxy's Prometheus metrics, on the process registry served at ``/metrics``."""

from prometheus_client import Counter, Histogram

from drydock.telemetry import REGISTRY

REQUESTS = Counter(
    "drydock_proxy_requests",
    "Requests through the credential proxy, by route (git, api, egress) and outcome "
    "(forwarded, denied, rejected, unavailable, store_unavailable, upstream_error).",
    ["route", "outcome"],
    registry=REGISTRY,
)
UPSTREAM_SECONDS = Histogram(
    "drydock_proxy_upstream_seconds",
    "Time until the upstream's response headers arrived, by route.",
    ["route"],
    registry=REGISTRY,
)
