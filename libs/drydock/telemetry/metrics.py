"""The Prometheus registry shared by a process's services, and the ``/metrics`` response."""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    gc_collector,
    generate_latest,
    multiprocess,
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


MULTIPROCESS_DIRECTORY = "PROMETHEUS_MULTIPROC_DIR"
"""Where prometheus_client keeps each process's values when several processes serve one port;
the process that starts them sets it for them."""


def workers_registry() -> CollectorRegistry:
    """The counters and histograms of every worker process, read from their files in
    :data:`MULTIPROCESS_DIRECTORY`."""
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return registry
