"""OpenTelemetry context carried in NATS message headers (W3C trace context)."""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import context, propagate
from opentelemetry.context import Context


def inject_headers(headers: dict[str, str]) -> dict[str, str]:
    """Add the current trace context (``traceparent``, ``tracestate``) to outgoing headers."""
    propagate.inject(headers)
    return headers


def extract_context(headers: Mapping[str, str] | None) -> Context:
    """The trace context a message was published in, to continue its trace."""
    return propagate.extract(dict(headers or {}))


def attach_from(headers: Mapping[str, str] | None) -> object:
    """Make the message's trace context current; pass the token to :func:`opentelemetry.context.detach`."""
    return context.attach(extract_context(headers))
