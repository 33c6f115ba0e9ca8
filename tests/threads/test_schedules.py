"""Recurring schedules on the real Valkey and NATS: registered once per id, fired when due into
the thread's inbox with a wake, then moved to their next occurrence; missed occurrences fire
once; cancelled schedules stay gone."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from redis.asyncio import Redis

from drydock.bus import Bus
from drydock.bus.envelopes import Channel, ReplyAddress
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.scheduler import Schedules
from drydock.threads.fields import REPLY_TO, REPOSITORY
from drydock.threads.inbox import Inbox
from drydock.threads.metadata import ThreadMetadataStore
from tests.threads.test_scheduler import wakes

NOW = datetime(2030, 1, 31, 9, 0, tzinfo=UTC)
DAY = timedelta(days=1)


@pytest.fixture
def schedules(redis: Redis, keys: Keys) -> Schedules:
    return Schedules(redis, keys)


@pytest.fixture
async def thread(redis: Redis, keys: Keys, thread_id: str) -> str:
    """An analyzer thread on ``acme/widgets``."""
    fields = {REPLY_TO: ReplyAddress(channel=Channel.SCHEDULER).model_dump_json(), REPOSITORY: "acme/widgets"}
    await ThreadMetadataStore(redis, keys).create(thread_id, kind=Role.ANALYZER, fields=fields)
    return thread_id


async def register(schedules: Schedules, thread: str, schedule_id: str = "refine") -> bool:
    return await schedules.ensure(
        schedule_id, thread, Role.ANALYZER, DAY, "refine the guidelines", references={"mode": "continual"},
        first_due=NOW,
    )  # fmt: skip


class TestRegistration:
    async def test_a_schedule_is_registered_once_per_id(self, schedules: Schedules, thread: str) -> None:
        results = await asyncio.gather(*(register(schedules, thread) for _ in range(5)))
        assert sorted(results) == [False, False, False, False, True]
        assert [schedule.id for schedule in await schedules.all()] == ["refine"]
        found = await schedules.get("refine")
        assert found is not None
        assert (found.thread_id, found.role, found.every, found.references) == (
            thread, Role.ANALYZER, DAY, {"mode": "continual"},
        )  # fmt: skip
        assert await schedules.next_due("refine") == NOW

    async def test_a_schedule_needs_a_positive_interval(self, schedules: Schedules, thread: str) -> None:
        with pytest.raises(ValueError, match="positive"):
            await schedules.ensure("x", thread, Role.ANALYZER, timedelta(0), "never")

    async def test_without_a_first_due_time_it_fires_one_interval_from_now(
        self, schedules: Schedules, thread: str
    ) -> None:
        await schedules.ensure("later", thread, Role.ANALYZER, DAY, "later")
        due = await schedules.next_due("later")
        assert due is not None
        assert abs((due - datetime.now(UTC) - DAY).total_seconds()) < 60


class TestFiring:
    async def test_a_due_schedule_reaches_the_thread_and_moves_to_its_next_occurrence(
        self, schedules: Schedules, thread: str, bus: Bus
    ) -> None:
        await register(schedules, thread)
        assert await schedules.fire_due(bus, now=NOW - timedelta(seconds=1)) == 0
        assert await schedules.fire_due(bus, now=NOW + timedelta(seconds=5)) == 1

        [stored] = await Inbox(bus).read_after(thread)
        message = stored.message
        assert message.text == "Scheduled: refine the guidelines"
        assert message.channel is Channel.SCHEDULER
        assert message.repository == "acme/widgets"
        assert message.references["mode"] == "continual"
        assert message.references["schedule_id"] == "refine"
        assert [wake.role for wake in await wakes(bus, Role.ANALYZER, thread)] == [Role.ANALYZER]
        assert await schedules.next_due("refine") == NOW + DAY
        assert await schedules.fire_due(bus, now=NOW + timedelta(hours=1)) == 0

    async def test_missed_occurrences_fire_once(self, schedules: Schedules, thread: str, bus: Bus) -> None:
        await register(schedules, thread)
        late = NOW + 5 * DAY + timedelta(hours=1)
        assert await schedules.fire_due(bus, now=late) == 1
        assert await schedules.fire_due(bus, now=late) == 0
        assert await schedules.next_due("refine") == late + DAY
        assert len(await Inbox(bus).read_after(thread)) == 1

    async def test_a_cancelled_schedule_stays_gone(self, schedules: Schedules, thread: str, bus: Bus) -> None:
        await register(schedules, thread)
        assert await schedules.cancel("refine") is True
        assert await schedules.cancel("refine") is False
        assert await schedules.fire_due(bus, now=NOW + DAY) == 0
        assert await schedules.all() == []

    async def test_a_schedule_of_a_thread_without_metadata_is_kept_but_not_delivered(
        self, schedules: Schedules, bus: Bus
    ) -> None:
        await schedules.ensure("orphan", "no-such-thread", Role.ANALYZER, DAY, "x", first_due=NOW)
        assert await schedules.fire_due(bus, now=NOW) == 0
        assert await schedules.next_due("orphan") == NOW + DAY

    async def test_the_loop_stops_on_its_flag(self, schedules: Schedules, bus: Bus) -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(schedules.run_forever(bus, interval=0.05, stop=stop))
        await asyncio.sleep(0.1)
        stop.set()
        await asyncio.wait_for(task, 2)
