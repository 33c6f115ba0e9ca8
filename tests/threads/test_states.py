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


class TestActivityAndOutcome:
    async def test_a_state_change_records_when_and_an_ended_run_its_outcome(
        self, states: ThreadStates, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        await ThreadMetadataStore(redis, keys).create(thread_id, kind=Role.CODER)
        started = event(thread_id, EventType.STARTED)
        await states.observe(started)
        fields = await redis.hgetall(keys.thread(thread_id))
        assert fields["last_activity"] == started.at.isoformat()
        assert "outcome" not in fields
        for type, outcome in [(EventType.COMPLETED, "completed"), (EventType.ERROR, "failed")]:
            ended = event(thread_id, type)
            await states.observe(ended)
            fields = await redis.hgetall(keys.thread(thread_id))
            assert (fields["outcome"], fields["last_activity"]) == (outcome, ended.at.isoformat())
        await states.observe(event(thread_id, EventType.STARTED))
        assert await redis.hget(keys.thread(thread_id), "outcome") == "failed"

    async def test_a_state_left_in_place_records_nothing(
        self, states: ThreadStates, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        await ThreadMetadataStore(redis, keys).create(thread_id, kind=Role.CODER)
        await states.set(thread_id, ThreadState.RUNNING)
        before = await redis.hget(keys.thread(thread_id), "last_activity")
        assert not await states.set(thread_id, ThreadState.QUEUED, unless=[ThreadState.RUNNING], outcome="x")
        fields = await redis.hgetall(keys.thread(thread_id))
        assert (fields["last_activity"], fields.get("outcome")) == (before, None)
