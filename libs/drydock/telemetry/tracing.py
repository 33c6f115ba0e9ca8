"""Traces: one trace from a webhook through the bus, the wake, the run, each model and tool call,
to the sandbox daemon and the credential proxy.

Tracing is off unless the standard OpenTelemetry variables ask for it at start-up
(:func:`configure_tracing`): ``OTEL_TRACES_EXPORTER`` (``otlp``, ``console`` or ``none``), or,
without it, ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``; the exporter,
sampler, batch processor and resource read the rest (``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``, ``OTEL_EXPORTER_OTLP_HEADERS``, …) themselves.
Off, nothing is instrumented, :func:`span` and :func:`continued_trace` are a shared
``nullcontext`` and a publish injects no headers.

Trace context crosses NATS in the message headers (W3C ``traceparent``, injected by every
:class:`~drydock.bus.Bus` publish) and HTTP in the request headers (httpx's instrumentation, and
:func:`aiohttp_tracing` for aiohttp sessions: the model, the sandbox daemon, the code host). The
sandbox daemon passes an exec request's ``traceparent`` on to the command (``TRACEPARENT``, and
as an extra header of git's HTTP requests), so a clone or push reaches the credential proxy
inside the trace.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from opentelemetry import context, propagate, trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Span, SpanKind, StatusCode, Tracer
from starlette.types import ASGIApp

from drydock.config import ConfigError

if TYPE_CHECKING:
    import aiohttp
    from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

_NOTHING: contextlib.nullcontext[None] = contextlib.nullcontext()
_EXPORTERS = ("otlp", "console", "none")
_PROTOCOL = "http/protobuf"
_UNTRACED_PATHS = "/healthz,/readyz,/metrics"

THREAD_ID = "drydock.thread_id"
"""The span attribute naming a span's thread."""

_tracer: Tracer | None = None
_provider: TracerProvider | None = None


def inject_headers(headers: dict[str, str]) -> dict[str, str]:
    """Add the current trace context (``traceparent``, ``tracestate``) to outgoing headers.
    Untraced there is none to add, and not looking saves the propagators' walk (2 µs a publish)."""
    if _tracer is not None:
        propagate.inject(headers)
    return headers


def extract_context(headers: Mapping[str, str] | None) -> Context:
    """The trace context a message was published in, to continue its trace."""
    return propagate.extract(dict(headers or {}))


def exporters_requested(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The span exporters the OpenTelemetry variables in ``environ`` ask for; none when unset.

    Unlike the specification's default (``otlp``), an unset ``OTEL_TRACES_EXPORTER`` exports only
    when an OTLP endpoint is set: a service started without telemetry settings sends nothing.
    Raises :class:`ConfigError` for an exporter or protocol this build lacks.
    """
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ()
    raw = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if raw:
        names = tuple(dict.fromkeys(name.strip() for name in raw.split(",") if name.strip()))
    elif environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        names = ("otlp",)
    else:
        return ()
    unknown = [name for name in names if name not in _EXPORTERS]
    if unknown:
        raise ConfigError(f"OTEL_TRACES_EXPORTER: {', '.join(unknown)} is not one of {', '.join(_EXPORTERS)}")
    names = tuple(name for name in names if name != "none")
    protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    if "otlp" in names and protocol and protocol.strip() != _PROTOCOL:
        raise ConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL: only {_PROTOCOL} is supported, not {protocol.strip()!r}")
    return names


def provider_from_environment(environ: Mapping[str, str], *, service: str) -> TracerProvider | None:
    """A tracer provider exporting as ``environ`` asks, or ``None`` when it asks for no export.
    ``service`` is the ``service.name`` unless ``OTEL_SERVICE_NAME`` or ``OTEL_RESOURCE_ATTRIBUTES``
    names one. (The SDK's parts read their own variables from the process's environment, which
    ``environ`` is at start-up.)"""
    names = exporters_requested(environ)
    if not names:
        return None
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service}))
    provider = TracerProvider(resource=resource)
    for name in names:
        exporter: SpanExporter
        if name == "otlp":
            # Imported here: it pulls in protobuf and requests, which an untraced process never needs.
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        else:
            exporter = ConsoleSpanExporter(service_name=service)
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def configure_tracing(environ: Mapping[str, str], *, service: str) -> TracerProvider | None:
    """At start-up: trace this process as the OpenTelemetry variables in ``environ`` ask
    (:func:`provider_from_environment`), as the global tracer provider too. ``None``: untraced."""
    provider = provider_from_environment(environ, service=service)
    if provider is not None:
        trace.set_tracer_provider(provider)
        install(provider)
    return provider


def install(provider: TracerProvider) -> None:
    """Record this process's spans with ``provider`` and instrument the clients of httpx and of
    httpx2 (the OpenAI SDK's) with it (tests install an in-memory exporter's provider, then
    :func:`uninstall` it)."""
    global _tracer, _provider
    uninstall()
    _provider = provider
    _tracer = provider.get_tracer("drydock")
    for instrumentor in _http_instrumentors():
        instrumentor.instrument(tracer_provider=provider)


def uninstall() -> None:
    """Stop recording spans (the provider itself is left to its owner to shut down)."""
    global _tracer, _provider
    if _provider is None:
        return
    for instrumentor in _http_instrumentors():
        instrumentor.uninstrument()
    _tracer = _provider = None


def _http_instrumentors() -> tuple[BaseInstrumentor, ...]:
    # Imported here: an untraced process never loads them.
    from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor, HTTPXClientInstrumentor

    return HTTPXClientInstrumentor(), HTTPX2ClientInstrumentor()


def aiohttp_tracing() -> list[aiohttp.TraceConfig]:
    """The ``trace_configs`` of an aiohttp client session: a client span per request and its
    ``traceparent`` sent along, as httpx's instrumentation does (OpenTelemetry's aiohttp one is
    released behind the others and cannot be installed beside them); none when tracing is off."""
    if _tracer is None:
        return []
    import aiohttp

    config = aiohttp.TraceConfig()
    config.on_request_start.append(_request_started)
    config.on_request_end.append(_request_ended)
    config.on_request_exception.append(_request_failed)
    return [config]


async def _request_started(
    _session: aiohttp.ClientSession, call: SimpleNamespace, params: aiohttp.TraceRequestStartParams
) -> None:
    call.span = None
    if _tracer is None:
        return
    call.span = _tracer.start_span(
        params.method,
        kind=SpanKind.CLIENT,
        attributes={"http.request.method": params.method, "url.full": str(params.url)},
    )
    propagate.inject(params.headers, context=trace.set_span_in_context(call.span))


async def _request_ended(
    _session: aiohttp.ClientSession, call: SimpleNamespace, params: aiohttp.TraceRequestEndParams
) -> None:
    if call.span is not None:
        call.span.set_attribute("http.response.status_code", params.response.status)
        if params.response.status >= 500:
            call.span.set_status(StatusCode.ERROR)
        call.span.end()


async def _request_failed(
    _session: aiohttp.ClientSession, call: SimpleNamespace, params: aiohttp.TraceRequestExceptionParams
) -> None:
    if call.span is not None:
        call.span.record_exception(params.exception)
        call.span.set_status(StatusCode.ERROR)
        call.span.end()


def enabled() -> bool:
    return _tracer is not None


def span(
    name: str, *, kind: SpanKind = SpanKind.INTERNAL, attributes: Mapping[str, Any] | None = None
) -> contextlib.AbstractContextManager[Span | None]:
    """A span, current inside the block, when tracing is on; otherwise nothing at all."""
    if _tracer is None:
        return _NOTHING
    return _tracer.start_as_current_span(name, kind=kind, attributes=attributes)


def continued_trace(
    headers: Mapping[str, str] | None, name: str, *, subject: str, thread_id: str | None = None
) -> contextlib.AbstractContextManager[Span | None]:
    """A consumer's span for one message on ``subject``, in the trace the message was published
    in (its ``traceparent`` header); nothing when tracing is off."""
    if _tracer is None:
        return _NOTHING
    attributes = {"messaging.system": "nats", "messaging.destination.name": subject}
    if thread_id is not None:
        attributes[THREAD_ID] = thread_id
    return _continued(_tracer, headers, name, attributes, SpanKind.CONSUMER)


def served_request(headers: Mapping[str, str], name: str) -> contextlib.AbstractContextManager[Span | None]:
    """A server's span for one HTTP request, continuing the caller's ``traceparent``; nothing
    when tracing is off (for servers outside ASGI: the credential proxy)."""
    if _tracer is None:
        return _NOTHING
    return _continued(_tracer, headers, name, {}, SpanKind.SERVER)


@contextlib.contextmanager
def _continued(
    tracer: Tracer, headers: Mapping[str, str] | None, name: str, attributes: Mapping[str, Any], kind: SpanKind
) -> Iterator[Span]:
    token = context.attach(extract_context(headers))
    try:
        with tracer.start_as_current_span(name, kind=kind, attributes=attributes) as current:
            yield current
    finally:
        context.detach(token)


def traced_asgi(app: ASGIApp) -> ASGIApp | None:
    """``app`` inside OpenTelemetry's ASGI middleware (a server span per request, continuing a
    caller's ``traceparent``; no spans for the probes and metrics); ``None`` when tracing is off."""
    if _provider is None:
        return None
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

    traced: ASGIApp = OpenTelemetryMiddleware(
        app, excluded_urls=_UNTRACED_PATHS, tracer_provider=_provider, exclude_spans=["receive", "send"]
    )
    return traced


def publish_span(subject: str) -> contextlib.AbstractContextManager[Span | None]:
    """The producer's span of one NATS publish, named by the subject's stream part
    (``drydock.inbox``, ``drydock.run``, …; the thread id is an attribute)."""
    if _tracer is None:
        return _NOTHING
    return _tracer.start_as_current_span(
        "publish " + ".".join(subject.split(".", 2)[:2]),
        kind=SpanKind.PRODUCER,
        attributes={"messaging.system": "nats", "messaging.destination.name": subject},
    )


def link_to(carriers: Iterable[Mapping[str, str] | None]) -> None:
    """Link the current span to the traces of the messages it takes in (their headers): a run
    reads follow-ups that came in other webhooks' traces."""
    if _tracer is None:
        return
    current = trace.get_current_span()
    own = current.get_span_context().trace_id
    for headers in carriers:
        linked = trace.get_current_span(extract_context(headers)).get_span_context()
        if linked.is_valid and linked.trace_id != own:
            current.add_link(linked)


def model_span(model: str) -> contextlib.AbstractContextManager[Span | None]:
    """The span of one model call of a run (its retries and fallback inside it)."""
    if _tracer is None:
        return _NOTHING
    return _tracer.start_as_current_span(
        f"chat {model}",
        kind=SpanKind.CLIENT,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": model},
    )


def record_usage(current: Span, messages: Sequence[object]) -> None:
    """Put a model reply's token counts (LangChain's ``usage_metadata``) on its call's span."""
    for message in messages:
        usage = getattr(message, "usage_metadata", None)
        if isinstance(usage, Mapping):
            current.set_attribute("gen_ai.usage.input_tokens", int(usage.get("input_tokens") or 0))
            current.set_attribute("gen_ai.usage.output_tokens", int(usage.get("output_tokens") or 0))


def tool_span(name: str, call_id: str) -> contextlib.AbstractContextManager[Span | None]:
    """The span of one tool call (what it runs in the sandbox or sends out happens inside it)."""
    if _tracer is None:
        return _NOTHING
    return _tracer.start_as_current_span(
        f"execute_tool {name}",
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id},
    )
