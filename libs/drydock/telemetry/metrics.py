"""The Prometheus registry shared by a process's services, and the ``/metrics`` response."""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    gc_collector,
    generate_latest,
    platform_collector,
    process_collector,
)

REGISTRY = CollectorRegistry(auto_describe=True)
process_collector.ProcessCollector(registry=REGISTRY)
platform_collector.PlatformCollector(registry=REGISTRY)
gc_collector.GCCollector(registry=REGISTRY)


def metrics_response(registry: CollectorRegistry = REGISTRY) -> tuple[bytes, str]:
    """The exposition body and its content type."""
    return generate_latest(registry), CONTENT_TYPE_LATEST
