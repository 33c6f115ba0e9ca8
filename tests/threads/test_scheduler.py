"""Scheduled wake-ups on the real Valkey and NATS: scheduling and the per-thread cap, delivery
to the inbox and the wake when due, exclusive claims between replicas, retry after a failed
delivery, and the loop that stops on its flag."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from nats.js.api import PubAck
from nats.js.errors import NotFoundError
from redis.asyncio import Redis

from drydock.bus import Bus, BusUnavailable, Wake, subjects
from drydock.bus.envelopes import Channel, ReplyAddress
from drydock.bus.streams import RUNS_STREAM
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.scheduler import TooManyWakeups, Wakeups
from drydock.threads.fields import OWNER, REPLY_TO, REPOSITORY
from drydock.threads.inbox import Inbox
from drydock.threads.metadata import ThreadMetadataStore

NOW = datetime(2030, 1, 31, 9, 0, tzinfo=UTC)
SLACK = ReplyAddress(channel=Channel.SLACK, address={"team": "T1", "channel": "C1", "thread_ts": "1.5"})


@pytest.fixture
def wakeups(redis: Redis, keys: Keys) -> Wakeups:
    return Wakeups(redis, keys, max_pending=3, visibility=timedelta(seconds=60))


@pytest.fixture
async def thread(redis: Redis, keys: Keys, thread_id: str) -> str:
    """A coder thread that came from Slack, on ``acme/widgets``, started by ``user-1``."""
    fields = {REPLY_TO: SLACK.model_dump_json(), REPOSITORY: "acme/widgets", OWNER: "user-1"}
    await ThreadMetadataStore(redis, keys).create(thread_id, kind=Role.CODER, fields=fields)
    return thread_id


async def wakes(bus: Bus, role: Role, thread_id: str) -> list[Wake]:
    subject, found, seq = subjects.run(role, thread_id), list[Wake](), 0
    while True:
        try:
            raw = await bus.js.get_msg(RUNS_STREAM, seq=seq + 1, subject=subject, next=True)
        except NotFoundError:
            return found
        assert raw.data is not None
        assert raw.seq is not None
        found.append(Wake.model_validate_json(raw.data))
        seq = raw.seq


class WakesFail(Bus):
    """The session's bus, except that publishing a wake is not acknowledged."""

    def __init__(self, bus: Bus) -> None:
        super().__init__(bus.nc)

    async def wake(self, wake: Wake, *, msg_id: str | None = None, bounded: bool = True) -> PubAck:
        raise BusUnavailable("wake not acknowledged (test)")


class TestSchedule:
    async def test_pending_lists_the_thread_s_wake_ups_soonest_first(self, wakeups: Wakeups, thread_id: str) -> None:
        later = await wakeups.schedule(thread_id, Role.CODER, NOW + timedelta(hours=2), "later")
        sooner = await wakeups.schedule(thread_id, Role.CODER, NOW + timedelta(hours=1), "sooner")

        pending = await wakeups.pending(thread_id)

        assert [(w.id, w.note, w.due_at) for w in pending] == [
            (sooner, "sooner", NOW + timedelta(hours=1)),
            (later, "later", NOW + timedelta(hours=2)),
        ]

    async def test_the_cap_refuses_one_more(self, wakeups: Wakeups, thread_id: str) -> None:
        for index in range(3):
            await wakeups.schedule(thread_id, Role.CODER, NOW, f"n{index}")

        with pytest.raises(TooManyWakeups, match="already has 3 pending wake-ups"):
            await wakeups.schedule(thread_id, Role.CODER, NOW, "one more")

        assert len(await wakeups.pending(thread_id)) == 3

    async def test_cancel_frees_a_place(self, wakeups: Wakeups, thread_id: str) -> None:
        ids = [await wakeups.schedule(thread_id, Role.CODER, NOW, f"n{index}") for index in range(3)]

        assert await wakeups.cancel(ids[0]) is True
        assert await wakeups.cancel(ids[0]) is False
        await wakeups.schedule(thread_id, Role.CODER, NOW, "fits again")

        assert sorted(w.note for w in await wakeups.pending(thread_id)) == ["fits again", "n1", "n2"]

    async def test_a_time_without_a_zone_is_refused(self, wakeups: Wakeups, thread_id: str) -> None:
        with pytest.raises(ValueError, match="time zone"):
            await wakeups.schedule(thread_id, Role.CODER, datetime(2030, 1, 1, 9, 0), "naive")


class TestFireDue:
    async def test_nothing_fires_before_it_is_due(self, wakeups: Wakeups, bus: Bus, thread: str) -> None:
        await wakeups.schedule(thread, Role.CODER, NOW, "not yet")

        assert await wakeups.fire_due(bus, now=NOW - timedelta(seconds=1)) == 0

        assert await Inbox(bus).read_after(thread) == []
        assert len(await wakeups.pending(thread)) == 1

    async def test_a_due_wake_up_reaches_the_inbox_then_wakes_the_thread(
        self, wakeups: Wakeups, bus: Bus, thread: str
    ) -> None:
        wakeup_id = await wakeups.schedule(thread, Role.CODER, NOW, "check CI")

        assert await wakeups.fire_due(bus, now=NOW) == 1

        [stored] = await Inbox(bus).read_after(thread)
        message = stored.message
        assert (message.text, message.delivery_id, message.channel) == (
            "Scheduled wake-up: check CI",
            f"wakeup-{wakeup_id}",
            Channel.SCHEDULER,
        )
        assert (message.reply_to, message.repository, message.author.user_id) == (SLACK, "acme/widgets", "user-1")
        assert message.references == {"wakeup_id": wakeup_id, "scheduled_for": NOW.isoformat()}
        [wake] = await wakes(bus, Role.CODER, thread)
        assert (wake.thread_id, wake.role, wake.reason) == (thread, Role.CODER, "wakeup")
        assert await wakeups.pending(thread) == []

    async def test_at_most_limit_per_call(self, wakeups: Wakeups, bus: Bus, thread: str) -> None:
        for index in range(3):
            await wakeups.schedule(thread, Role.CODER, NOW + timedelta(seconds=index), f"n{index}")

        assert await wakeups.fire_due(bus, now=NOW + timedelta(minutes=1), limit=2) == 2
        assert [w.note for w in await wakeups.pending(thread)] == ["n2"]
        assert await wakeups.fire_due(bus, now=NOW + timedelta(minutes=1), limit=2) == 1

    async def test_two_replicas_never_fire_one_wake_up_twice(
        self, redis: Redis, keys: Keys, bus: Bus, thread: str
    ) -> None:
        scheduler = Wakeups(redis, keys, max_pending=100)
        for index in range(40):
            await scheduler.schedule(thread, Role.CODER, NOW, f"n{index}")
        replicas = [Wakeups(redis, keys) for _ in range(2)]

        counts = await asyncio.gather(
            *(replica.fire_due(bus, now=NOW, limit=7) for replica in replicas for _ in range(4))
        )

        assert sum(counts) == 40
        assert len(await Inbox(bus).read_after(thread)) == 40
        assert len(await wakes(bus, Role.CODER, thread)) == 40

    async def test_a_failed_delivery_is_retried_after_the_visibility_deadline(
        self, wakeups: Wakeups, bus: Bus, thread: str
    ) -> None:
        await wakeups.schedule(thread, Role.CODER, NOW, "check CI")

        assert await wakeups.fire_due(WakesFail(bus), now=NOW) == 0
        assert len(await wakeups.pending(thread)) == 1
        assert await wakeups.fire_due(bus, now=NOW + timedelta(seconds=30)) == 0
        assert await wakeups.fire_due(bus, now=NOW + timedelta(seconds=61)) == 1

        assert len(await Inbox(bus).read_after(thread)) == 1
        assert len(await wakes(bus, Role.CODER, thread)) == 1
        assert await wakeups.pending(thread) == []

    async def test_a_thread_without_metadata_is_dropped(self, wakeups: Wakeups, bus: Bus, thread_id: str) -> None:
        await wakeups.schedule(thread_id, Role.CODER, NOW, "orphan")

        assert await wakeups.fire_due(bus, now=NOW) == 0

        assert await wakeups.pending(thread_id) == []
        assert await Inbox(bus).read_after(thread_id) == []


class TestRunForever:
    async def test_fires_due_wake_ups_until_stopped(self, wakeups: Wakeups, bus: Bus, thread: str) -> None:
        await wakeups.schedule(thread, Role.CODER, datetime.now(UTC), "now")
        stop = asyncio.Event()
        loop = asyncio.create_task(wakeups.run_forever(bus, interval=0.05, stop=stop))
        try:
            async with asyncio.timeout(5):
                while True:
                    if await Inbox(bus).read_after(thread):
                        break
                    await asyncio.sleep(0.02)
        finally:
            stop.set()
            await asyncio.wait_for(loop, timeout=2)

        assert loop.done()
        assert loop.exception() is None
        assert await wakeups.pending(thread) == []
