"""A run's events on real NATS and Valkey: the run's start sets the thread's state at once and
is stored, in order, before the run's end is."""

from __future__ import annotations

import pytest
from nats.js.api import PubAck
from redis.asyncio import Redis

from drydock.bus import Bus, EventType, RunEvent
from drydock.bus.envelopes import Channel, ReplyAddress
from drydock.bus.streams import EVENTS_STREAM
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.threads.metadata import ThreadMetadataStore
from drydock.threads.scope import ThreadScope
from drydock.threads.states import ThreadState, ThreadStates
from drydock.worker.run_events import RunEvents


class AcknowledgedEmitsRefused(Bus):
    """The tests' bus, refusing the publishes that wait for their acknowledgement."""

    async def emit(self, event: RunEvent) -> PubAck:
        raise AssertionError(f"{event.type.value} waited for its acknowledgement")


@pytest.fixture
async def states(redis: Redis, keys: Keys, thread_id: str) -> ThreadStates:
    await ThreadMetadataStore(redis, keys).create(thread_id, kind=Role.CODER)
    return ThreadStates(redis, keys)


def run_events(bus: Bus, states: ThreadStates, thread_id: str) -> RunEvents:
    scope = ThreadScope(thread_id, "run-1", Role.CODER, "acme/widgets", ReplyAddress(channel=Channel.GITHUB))
    return RunEvents(bus, scope, states)


async def stored(bus: Bus, thread_id: str) -> list[EventType]:
    subscription = await bus.js.pull_subscribe(f"drydock.event.{thread_id}.>", stream=EVENTS_STREAM)
    try:
        messages = await subscription.fetch(10, timeout=2)
    finally:
        await subscription.unsubscribe()
    return [RunEvent.model_validate_json(message.data).type for message in messages]


class TestBegin:
    async def test_the_state_is_running_when_it_returns_without_waiting_for_the_acknowledgement(
        self, bus: Bus, states: ThreadStates, thread_id: str
    ) -> None:
        events = run_events(AcknowledgedEmitsRefused(bus.nc), states, thread_id)
        await events.begin(model="m", sandbox_id="s")
        assert await states.get(thread_id) is ThreadState.RUNNING
        await events.acknowledged()
        assert await stored(bus, thread_id) == [EventType.STARTED]

    async def test_the_start_is_stored_and_observed_before_the_end(
        self, bus: Bus, states: ThreadStates, thread_id: str
    ) -> None:
        events = run_events(bus, states, thread_id)
        await events.begin(model="m", sandbox_id="s")
        await events.emit_soon(EventType.MODEL_CALL, tool_calls=[])
        await events.emit(EventType.COMPLETED, summary="done")
        assert await stored(bus, thread_id) == [EventType.STARTED, EventType.MODEL_CALL, EventType.COMPLETED]
        assert await states.get(thread_id) is ThreadState.IDLE
