from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from drydock.bus import Author, Bus, Channel, InboxMessage, ReplyAddress, Trigger, Wake
from drydock.config import Settings
from drydock.embedded import EmbeddedServer
from drydock.infra.redis import Keys, redis_client
from drydock.roles import Role
from drydock.threads import Inbox, Lease, Leases
from drydock.worker import ThreadRunner


def message(thread_id: str, delivery_id: str, trigger: Trigger | None = None) -> InboxMessage:
    return InboxMessage(
        delivery_id=delivery_id,
        thread_id=thread_id,
        channel=Channel.SLACK,
        author=Author(channel=Channel.SLACK, external_id="U1", name="ada"),
        text=delivery_id,
        reply_to=ReplyAddress(channel=Channel.SLACK),
        trigger=trigger,
    )


class RecordingAgent:
    """Stands in for the graph: consumes the inbox after its cursor, as the real run does."""

    def __init__(self, inbox: Inbox, *, work: float = 0.0) -> None:
        self.inbox = inbox
        self.work = work
        self.cursor = 0
        self.handled: list[str] = []
        self.runs = 0
        self.read = asyncio.Event()
        """Set once a run has read the inbox."""
        self.running = 0
        self.most_concurrent = 0

    async def __call__(self, thread_id: str, lease: Lease) -> int:
        self.running += 1
        self.runs += 1
        self.most_concurrent = max(self.most_concurrent, self.running)
        try:
            for stored in await self.inbox.read_after(thread_id, self.cursor):
                self.handled.append(stored.message.text)
                self.cursor = stored.seq
            self.read.set()
            await asyncio.sleep(self.work)
            return self.cursor
        finally:
            self.running -= 1


@pytest.fixture
def leases(redis: Redis, keys: Keys) -> Leases:
    return Leases(redis, keys, ttl=timedelta(seconds=5))


@pytest.fixture
def inbox(bus: Bus) -> Inbox:
    return Inbox(bus)


class TestThreadRunner:
    async def test_two_wakes_for_one_thread_never_run_two_agents(
        self, leases: Leases, inbox: Inbox, thread_id: str
    ) -> None:
        agent = RecordingAgent(inbox, work=0.3)
        await inbox.append(message(thread_id, "first"))
        runners = [ThreadRunner(leases, inbox, agent, owner=f"worker-{i}") for i in range(2)]
        wake = Wake(thread_id=thread_id, role=Role.CODER)
        await asyncio.gather(*(runner(wake) for runner in runners))
        assert agent.most_concurrent == 1
        assert agent.handled == ["first"]

    async def test_messages_arriving_during_a_run_are_run_before_release(
        self, leases: Leases, inbox: Inbox, thread_id: str
    ) -> None:
        agent = RecordingAgent(inbox, work=0.2)
        await inbox.append(message(thread_id, "one"))
        runner = ThreadRunner(leases, inbox, agent, owner="w")
        run = asyncio.create_task(runner(Wake(thread_id=thread_id, role=Role.CODER)))
        await asyncio.sleep(0.1)
        await inbox.append(message(thread_id, "two"))
        await run
        assert agent.handled == ["one", "two"]
        assert await leases.acquire(thread_id, "next") is not None, "the lease was released"

    async def test_context_arriving_during_a_run_waits_for_the_next_wake(
        self, leases: Leases, inbox: Inbox, thread_id: str
    ) -> None:
        agent = RecordingAgent(inbox, work=0.2)
        await inbox.append(message(thread_id, "one", Trigger.MENTION))
        runner = ThreadRunner(leases, inbox, agent, owner="w")
        run = asyncio.create_task(runner(Wake(thread_id=thread_id, role=Role.CODER)))
        await asyncio.wait_for(agent.read.wait(), 30)
        await inbox.append(message(thread_id, "note", Trigger.CONTEXT))
        await run
        assert (agent.handled, agent.runs) == (["one"], 1)
        await inbox.append(message(thread_id, "two", Trigger.MENTION))
        await runner(Wake(thread_id=thread_id, role=Role.CODER))
        assert (agent.handled, agent.runs) == (["one", "note", "two"], 2)

    async def test_a_message_arriving_while_the_lease_is_released_is_not_stranded(
        self, redis: Redis, keys: Keys, inbox: Inbox, thread_id: str
    ) -> None:
        class ReleaseRace(Leases):
            """Real leases; a message lands between the last look inside the lease and the release,
            and its own wake is dropped because the lease still looked held."""

            raced = False

            async def release(self, lease: Lease) -> bool:
                if not self.raced:
                    self.raced = True
                    await inbox.append(message(thread_id, "late"))
                return await super().release(lease)

        agent = RecordingAgent(inbox)
        await inbox.append(message(thread_id, "early"))
        await ThreadRunner(ReleaseRace(redis, keys, ttl=timedelta(seconds=5)), inbox, agent, owner="w")(
            Wake(thread_id=thread_id, role=Role.CODER)
        )
        assert agent.handled == ["early", "late"]

    async def test_a_busy_thread_is_left_to_its_holder(self, leases: Leases, inbox: Inbox, thread_id: str) -> None:
        holder = await leases.acquire(thread_id, "holder")
        assert holder is not None
        agent = RecordingAgent(inbox)
        await inbox.append(message(thread_id, "queued"))
        await ThreadRunner(leases, inbox, agent, owner="w")(Wake(thread_id=thread_id, role=Role.CODER))
        assert agent.handled == []


class TestStoreErrors:
    async def test_a_run_failing_on_the_store_releases_its_lease_and_fails_the_wake(
        self, settings: Settings, own_valkey: EmbeddedServer, bus: Bus, keys: Keys, thread_id: str
    ) -> None:
        """The error reaches the wake consumer (which naks the wake for a prompt redelivery) and
        the lease is free at once, released on the restarted store (over connections the restart
        left stale), not left to expire."""
        client = redis_client(settings.redis, own_valkey.url, decode_responses=True)
        inbox = Inbox(bus)
        leases = Leases(client, keys, ttl=timedelta(seconds=30))
        await inbox.append(message(thread_id, "first"))

        async def run_meeting_an_outage(thread: str, lease: Lease) -> int:
            await own_valkey.stop()
            try:
                await client.set(f"run-output-{thread}", "lost")
            finally:
                await own_valkey.start()
            return 0

        try:
            with pytest.raises(RedisConnectionError):
                await ThreadRunner(leases, inbox, run_meeting_an_outage, owner="w")(
                    Wake(thread_id=thread_id, role=Role.CODER)
                )
            assert await leases.acquire(thread_id, "next") is not None
        finally:
            await client.aclose()
