from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest
from aiohttp import web
from nats.aio.msg import Msg
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.trace import SpanKind

from drydock.bus import Bus, EventType, RunEvent
from drydock.config import ConfigError
from drydock.telemetry import tracing
from drydock.telemetry.tracing import exporters_requested, provider_from_environment
from tests.telemetry.spans import attribute, named, parent_id, recorded_spans, span_id, trace_id, traceparent_of

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_OTEL = (
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
)


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The process's environment without OpenTelemetry variables; set them with ``monkeypatch``."""
    for name in _OTEL:
        monkeypatch.delenv(name, raising=False)
    return dict(os.environ)


class TestWhatIsExported:
    def test_nothing_without_variables(self, environ: dict[str, str]) -> None:
        assert exporters_requested(environ) == ()
        assert provider_from_environment(environ, service="drydock-ingress") is None

    def test_an_endpoint_alone_exports_otlp(self, environ: dict[str, str]) -> None:
        assert exporters_requested(environ | {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) == ("otlp",)
        assert exporters_requested(environ | {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c/v1/traces"}) == ("otlp",)

    def test_the_exporter_variable_decides(self, environ: dict[str, str]) -> None:
        endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
        assert exporters_requested(environ | endpoint | {"OTEL_TRACES_EXPORTER": "none"}) == ()
        assert exporters_requested(environ | {"OTEL_TRACES_EXPORTER": "console, otlp"}) == ("console", "otlp")

    def test_the_sdk_switched_off_exports_nothing(self, environ: dict[str, str]) -> None:
        switched_off = {"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}
        assert exporters_requested(environ | switched_off) == ()

    def test_an_unknown_exporter_is_named(self, environ: dict[str, str]) -> None:
        with pytest.raises(ConfigError, match="OTEL_TRACES_EXPORTER: zipkin is not one of otlp, console, none"):
            exporters_requested(environ | {"OTEL_TRACES_EXPORTER": "zipkin"})

    def test_grpc_is_refused_with_the_protocol_that_works(self, environ: dict[str, str]) -> None:
        with pytest.raises(ConfigError, match="only http/protobuf is supported, not 'grpc'"):
            exporters_requested(environ | {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})


class TestUntraced:
    def test_spans_are_one_shared_nothing(self) -> None:
        assert not tracing.enabled()
        assert tracing.span("x") is tracing.span("y")
        assert tracing.continued_trace({}, "wake", subject="s") is tracing.span("x")
        assert tracing.model_span("m") is tracing.tool_span("t", "c") is tracing.publish_span("a.b.c")
        assert tracing.traced_asgi(_asgi_app) is None

    async def test_a_publish_carries_no_trace_context(self, bus: Bus, thread_id: str) -> None:
        subject = f"drydock.event.{thread_id}.started"
        async with _subscribed(bus, subject) as received:
            await bus.emit(RunEvent(thread_id=thread_id, run_id="r1", type=EventType.STARTED))
            message = await asyncio.wait_for(received.get(), 5)
        assert "traceparent" not in (message.headers or {})


class TestAcrossTheBus:
    async def test_a_publish_is_a_producer_span_the_message_carries(self, bus: Bus, thread_id: str) -> None:
        subject = f"drydock.event.{thread_id}.started"
        with recorded_spans() as recording:
            async with _subscribed(bus, subject) as received:
                with recording.tracer.start_as_current_span("request") as request:
                    await bus.emit(RunEvent(thread_id=thread_id, run_id="r1", type=EventType.STARTED))
                message = await asyncio.wait_for(received.get(), 5)
            with tracing.continued_trace(message.headers, "read", subject=subject):
                pass
        [publish] = named(recording.spans(), "publish drydock.event")
        [read] = named(recording.spans(), "read")
        assert publish.kind is SpanKind.PRODUCER
        assert parent_id(publish) == request.get_span_context().span_id
        assert (trace_id(read), parent_id(read)) == (trace_id(publish), span_id(publish))
        assert attribute(read, "messaging.destination.name") == subject


class TestExport:
    async def test_spans_reach_an_otlp_http_collector_with_the_service_name(
        self, environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        async with _collector() as (endpoint, requests):
            monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
            provider = provider_from_environment(dict(os.environ), service="drydock-ingress")
            assert provider is not None
            with provider.get_tracer("test").start_as_current_span("webhook"):
                pass
            assert await asyncio.to_thread(provider.force_flush, 10_000)
            await asyncio.to_thread(provider.shutdown)
        [exported] = requests
        [resource_spans] = exported.resource_spans
        names = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
        assert names["service.name"] == "drydock-ingress"
        assert [s.name for scope in resource_spans.scope_spans for s in scope.spans] == ["webhook"]

    async def test_otel_service_name_wins(self, environ: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "ingress-eu")
        provider = provider_from_environment(dict(os.environ), service="drydock-ingress")
        assert provider is not None
        assert provider.resource.attributes["service.name"] == "ingress-eu"
        provider.shutdown()


class TestOutgoingHttp:
    async def test_an_httpx_request_carries_its_client_span(self) -> None:
        seen: list[str] = []

        async def answer(request: web.Request) -> web.Response:
            seen.append(request.headers.get("traceparent", ""))
            return web.Response(status=204)

        with recorded_spans() as recording:
            async with _serving("/exec", answer) as url, httpx.AsyncClient() as client:
                with recording.tracer.start_as_current_span("tool") as tool:
                    await client.post(f"{url}/exec")
        [call] = [span for span in recording.spans() if span.kind is SpanKind.CLIENT]
        assert parent_id(call) == tool.get_span_context().span_id
        assert [value.rsplit("-", 1)[0] for value in seen] == [traceparent_of(call)]


async def _asgi_app(scope: object, receive: object, send: object) -> None:
    raise AssertionError("not called")


@contextlib.asynccontextmanager
async def _subscribed(bus: Bus, subject: str) -> AsyncIterator[asyncio.Queue[Msg]]:
    received: asyncio.Queue[Msg] = asyncio.Queue()

    async def on_message(message: Msg) -> None:
        await received.put(message)

    subscription = await bus.nc.subscribe(subject, cb=on_message)
    try:
        yield received
    finally:
        await subscription.unsubscribe()


@contextlib.asynccontextmanager
async def _collector() -> AsyncIterator[tuple[str, list[ExportTraceServiceRequest]]]:
    """An OTLP/HTTP trace receiver on loopback: what it was sent, parsed."""
    requests: list[ExportTraceServiceRequest] = []

    async def traces(request: web.Request) -> web.Response:
        exported = ExportTraceServiceRequest()
        exported.ParseFromString(await request.read())
        requests.append(exported)
        return web.Response(body=b"", content_type="application/x-protobuf")

    async with _serving("/v1/traces", traces) as url:
        yield url, requests


@contextlib.asynccontextmanager
async def _serving(path: str, handler: Handler) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
