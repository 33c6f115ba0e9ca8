from __future__ import annotations

from drydock.bus import Bus, EventType, RunEvent, Wake
from drydock.bus.streams import EVENTS_STREAM
from drydock.roles import Role
from drydock.telemetry.tracing import extract_context


class TestPublish:
    async def test_wake_is_deduplicated_by_msg_id(self, bus: Bus, thread_id: str) -> None:
        first = await bus.wake(Wake(thread_id=thread_id, role=Role.ANALYZER), msg_id=f"wake-{thread_id}")
        again = await bus.wake(Wake(thread_id=thread_id, role=Role.ANALYZER), msg_id=f"wake-{thread_id}")
        assert not first.duplicate
        assert again.duplicate

    async def test_event_round_trip_carries_trace_context(self, bus: Bus, thread_id: str) -> None:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider

        tracer = TracerProvider().get_tracer("test")
        with tracer.start_as_current_span("publish") as span:
            ack = await bus.emit(RunEvent(thread_id=thread_id, run_id="r1", type=EventType.STARTED))
        stored = await bus.js.get_msg(EVENTS_STREAM, seq=ack.seq)
        assert stored.subject == f"drydock.event.{thread_id}.started"
        assert stored.data is not None
        assert RunEvent.model_validate_json(stored.data).type is EventType.STARTED
        carried = trace.get_current_span(extract_context(stored.headers)).get_span_context()
        assert carried.trace_id == span.get_span_context().trace_id
