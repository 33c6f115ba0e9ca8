from __future__ import annotations

import pytest

from drydock.bus import Bus, BusUnavailable, EventType, RunEvent, Wake
from drydock.bus.streams import EVENTS_STREAM
from drydock.roles import Role
from drydock.telemetry.tracing import extract_context
from tests.telemetry.spans import recorded_spans


class TestPublish:
    async def test_wake_is_deduplicated_by_msg_id(self, bus: Bus, thread_id: str) -> None:
        first = await bus.wake(Wake(thread_id=thread_id, role=Role.ANALYZER), msg_id=f"wake-{thread_id}")
        again = await bus.wake(Wake(thread_id=thread_id, role=Role.ANALYZER), msg_id=f"wake-{thread_id}")
        assert not first.duplicate
        assert again.duplicate

    async def test_event_round_trip_carries_trace_context(self, bus: Bus, thread_id: str) -> None:
        from opentelemetry import trace

        with recorded_spans() as recording, recording.tracer.start_as_current_span("publish") as span:
            ack = await bus.emit(RunEvent(thread_id=thread_id, run_id="r1", type=EventType.STARTED))
        stored = await bus.js.get_msg(EVENTS_STREAM, seq=ack.seq)
        assert stored.subject == f"drydock.event.{thread_id}.started"
        assert stored.data is not None
        assert RunEvent.model_validate_json(stored.data).type is EventType.STARTED
        carried = trace.get_current_span(extract_context(stored.headers)).get_span_context()
        assert carried.trace_id == span.get_span_context().trace_id

    async def test_events_published_soon_are_stored_in_order_before_a_later_acknowledged_one(
        self, bus: Bus, thread_id: str
    ) -> None:
        soon = [
            await bus.emit_soon(RunEvent(thread_id=thread_id, run_id="r1", type=EventType.MODEL_CALL, data={"n": n}))
            for n in range(3)
        ]
        last = await bus.emit(RunEvent(thread_id=thread_id, run_id="r1", type=EventType.COMPLETED))
        await bus.acknowledged(soon)
        sequences = [future.result().seq for future in soon]
        assert sequences == sorted(sequences)
        assert sequences[-1] < last.seq

    async def test_a_publish_no_stream_takes_fails_its_acknowledgement(self, bus: Bus) -> None:
        pending = await bus.publish_soon("nowhere.stored", RunEvent(thread_id="t", run_id="r", type=EventType.STARTED))
        with pytest.raises(BusUnavailable, match="not acknowledged"):
            await bus.acknowledged([pending])
