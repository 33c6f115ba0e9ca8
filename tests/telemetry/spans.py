"""Recording this process's spans in memory, with the SDK's own exporter, for one test."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from drydock.telemetry.tracing import install, uninstall


@dataclass(frozen=True)
class Recording:
    exporter: InMemorySpanExporter
    provider: TracerProvider

    def spans(self) -> tuple[ReadableSpan, ...]:
        """The spans ended so far."""
        return self.exporter.get_finished_spans()

    @property
    def tracer(self) -> Tracer:
        """A tracer of the recording provider, for a test's own spans."""
        return self.provider.get_tracer("tests")


@contextlib.contextmanager
def recorded_spans() -> Iterator[Recording]:
    """Trace everything inside the block (httpx's clients too) into memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    install(provider)
    try:
        yield Recording(exporter, provider)
    finally:
        uninstall()
        provider.shutdown()


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.trace_id)


def traceparent_of(span: ReadableSpan) -> str:
    """``traceparent`` naming ``span`` as the parent, without its flags."""
    return f"00-{trace_id(span):032x}-{span_id(span):016x}"


def attribute(span: ReadableSpan, key: str) -> object:
    """The span's attribute ``key``, or ``None``."""
    return (span.attributes or {}).get(key)
