"""Thread states on real Valkey: run events move a thread between states, and a state a writer
must not replace is left."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from drydock.bus import EventType, RunEvent
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.threads.metadata import ThreadMetadataStore
from drydock.threads.states import ThreadState, ThreadStates


@pytest.fixture
def states(redis: Redis, keys: Keys) -> ThreadStates:
    return ThreadStates(redis, keys)


def event(thread_id: str, type: EventType) -> RunEvent:
    return RunEvent(thread_id=thread_id, run_id="r", type=type)


class TestEvents:
    @pytest.mark.parametrize(
        ("type", "state"),
        [
            (EventType.STARTED, ThreadState.RUNNING),
            (EventType.COMPLETED, ThreadState.IDLE),
            (EventType.STEP_LIMIT, ThreadState.IDLE),
            (EventType.ERROR, ThreadState.FAILED),
            (EventType.STOPPED, ThreadState.STOPPED),
        ],
    )
    async def test_run_events_set_the_state(
        self, states: ThreadStates, redis: Redis, keys: Keys, thread_id: str, type: EventType, state: ThreadState
    ) -> None:
        await ThreadMetadataStore(redis, keys).create(thread_id, kind=Role.CODER)
        await states.observe(event(thread_id, type))
        assert await states.get(thread_id) is state

    async def test_other_events_leave_it(self, states: ThreadStates, redis: Redis, keys: Keys, thread_id: str) -> None:
        await ThreadMetadataStore(redis, keys).create(thread_id, kind=Role.CODER)
        await states.observe(event(thread_id, EventType.STARTED))
        await states.observe(event(thread_id, EventType.MODEL_CALL))
        assert await states.get(thread_id) is ThreadState.RUNNING


class TestSet:
    async def test_a_state_named_in_unless_is_kept(
        self, states: ThreadStates, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        await ThreadMetadataStore(redis, keys).create(thread_id, kind=Role.CODER)
        await states.set(thread_id, ThreadState.RUNNING)
        assert await states.set(thread_id, ThreadState.QUEUED, unless=[ThreadState.RUNNING]) is False
        assert await states.get(thread_id) is ThreadState.RUNNING
        await states.set(thread_id, ThreadState.IDLE)
        assert await states.set(thread_id, ThreadState.QUEUED, unless=[ThreadState.RUNNING]) is True

    async def test_a_missing_thread_gets_no_state(self, states: ThreadStates, thread_id: str) -> None:
        assert await states.set(thread_id, ThreadState.RUNNING) is False
        assert await states.get(thread_id) is None
