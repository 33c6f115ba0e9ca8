"""Structured logs, Prometheus metrics and OpenTelemetry context for every service."""

from drydock.telemetry.logging import bind_run, configure_logging
from drydock.telemetry.metrics import REGISTRY, metrics_response, workers_registry

__all__ = ["REGISTRY", "bind_run", "configure_logging", "metrics_response", "workers_registry"]
