"""Live events shared by a thread's viewers: one consumer per thread per process, history then
live events without gaps or repeats, and a viewer that falls behind is let go."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from drydock.bus import Bus, EventType, RunEvent
from services.dashboard.threads import fanout
from services.dashboard.threads.events import StoredEvent, ThreadEvents
from services.dashboard.threads.fanout import EventFanout


async def emit(bus: Bus, thread_id: str, number: int) -> None:
    await bus.emit(RunEvent(thread_id=thread_id, run_id="r", type=EventType.TOOL_CALL, data={"n": number}))


async def take(stream: AsyncIterator[StoredEvent | None], count: int) -> list[int]:
    numbers: list[int] = []
    async for stored in stream:
        if stored is not None:
            numbers.append(stored.event.data["n"])
            if len(numbers) == count:
                break
    return numbers


@pytest.fixture
def shared(bus: Bus) -> EventFanout:
    return EventFanout(ThreadEvents(bus.js))


class TestFanout:
    async def test_viewers_of_a_thread_share_one_consumer_until_the_last_leaves(
        self, bus: Bus, shared: EventFanout
    ) -> None:
        thread_id = str(uuid.uuid4())
        await emit(bus, thread_id, 0)
        first, second = shared.follow(thread_id), shared.follow(thread_id)
        assert await take(first, 1) == [0]
        assert await take(second, 1) == [0]
        assert shared.followed == 1
        await emit(bus, thread_id, 1)
        assert await take(first, 1) == [1]
        assert await take(second, 1) == [1]
        await first.aclose()
        assert shared.followed == 1
        await second.aclose()
        assert shared.followed == 0

    async def test_a_viewer_joining_mid_burst_sees_each_event_once_in_order(
        self, bus: Bus, shared: EventFanout
    ) -> None:
        thread_id = str(uuid.uuid4())

        async def burst() -> None:
            for number in range(60):
                await emit(bus, thread_id, number)

        publishing = asyncio.create_task(burst())
        await asyncio.sleep(0.005)
        stream = shared.follow(thread_id)
        assert await asyncio.wait_for(take(stream, 60), 20) == list(range(60))
        await publishing
        await stream.aclose()

    async def test_it_continues_after_the_event_a_viewer_saw_last(self, bus: Bus, shared: EventFanout) -> None:
        thread_id = str(uuid.uuid4())
        for number in range(3):
            await emit(bus, thread_id, number)
        history = await ThreadEvents(bus.js).history(thread_id)
        stream = shared.follow(thread_id, after=history[0].seq)
        assert await take(stream, 2) == [1, 2]
        await stream.aclose()

    async def test_a_viewer_that_falls_behind_is_let_go(
        self, bus: Bus, shared: EventFanout, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(fanout, "QUEUE_LIMIT", 3)
        thread_id = str(uuid.uuid4())
        slow, keeping_up = shared.follow(thread_id), shared.follow(thread_id, heartbeat=0.05)
        await emit(bus, thread_id, 0)
        assert await take(slow, 1) == [0]
        assert await take(keeping_up, 1) == [0]
        for number in range(1, 10):
            await emit(bus, thread_id, number)
            assert await take(keeping_up, 1) == [number]
        assert len(await asyncio.wait_for(take(slow, 100), 5)) < 9
        await keeping_up.aclose()

    async def test_a_stream_ends_after_its_lifetime(self, bus: Bus, shared: EventFanout) -> None:
        stream = shared.follow(str(uuid.uuid4()), heartbeat=0.05, lifetime=0.2)
        items = [item async for item in stream]
        assert items
        assert all(item is None for item in items)
        assert shared.followed == 0
