"""One active controller at a time: a standby takes over when the leader stops or loses the lease."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from redis.asyncio import Redis

from drydock.autofix.leadership import Lead, Leadership, Term
from drydock.config import Settings
from drydock.embedded import EmbeddedServer
from drydock.infra.redis import Keys, redis_client
from tests.waiting import eventually

TTL = timedelta(milliseconds=600)


def replica(redis: Redis, keys: Keys, name: str) -> Leadership:
    return Leadership(redis, keys, owner=name, ttl=TTL)


class Tenure:
    """Records which replica leads, and lets a test end a term."""

    def __init__(self) -> None:
        self.terms: list[tuple[str, int]] = []
        self.leading: set[str] = set()
        self.started = asyncio.Event()

    def lead(self, name: str) -> Lead:
        async def run(term: Term) -> None:
            self.terms.append((name, term.fence))
            self.leading.add(name)
            self.started.set()
            try:
                await term.ended.wait()
            finally:
                self.leading.discard(name)

        return run


class TestLeadership:
    async def test_one_leads_while_the_other_stands_by(self, redis: Redis, keys: Keys) -> None:
        tenure, stop_a, stop_b = Tenure(), asyncio.Event(), asyncio.Event()
        a = asyncio.create_task(replica(redis, keys, "a").run(tenure.lead("a"), stop=stop_a))
        await tenure.started.wait()
        b = asyncio.create_task(replica(redis, keys, "b").run(tenure.lead("b"), stop=stop_b))
        await asyncio.sleep(TTL.total_seconds() * 2)
        assert tenure.leading == {"a"}, "the lease is renewed, so the standby never leads"

        stop_a.set()
        await a
        await eventually(lambda: tenure.leading == {"b"})
        assert [name for name, _ in tenure.terms] == ["a", "b"]
        assert tenure.terms[1][1] > tenure.terms[0][1], "every term has a higher fence"
        stop_b.set()
        await b

    async def test_a_leader_that_lost_its_lease_ends_its_term(self, redis: Redis, keys: Keys) -> None:
        tenure, stop = Tenure(), asyncio.Event()
        leader = replica(redis, keys, "a")
        task = asyncio.create_task(leader.run(tenure.lead("a"), stop=stop))
        await tenure.started.wait()
        await redis.set(keys.autofix_leader(), "intruder|999", px=5000)
        await eventually(lambda: not tenure.leading)
        assert tenure.terms == [("a", tenure.terms[0][1])]
        stop.set()
        await task

    async def test_a_crashed_leader_is_replaced_after_the_ttl(self, redis: Redis, keys: Keys) -> None:
        crashed = await replica(redis, keys, "crashed").acquire()
        assert crashed is not None
        standby = replica(redis, keys, "b")
        assert await standby.acquire() is None
        await asyncio.sleep(TTL.total_seconds() + 0.1)
        term = await standby.acquire()
        assert term is not None
        assert term.fence == crashed.fence + 1
        assert not await replica(redis, keys, "crashed").renew(crashed)

    async def test_an_error_of_the_leader_is_raised(self, redis: Redis, keys: Keys) -> None:
        async def failing(term: Term) -> None:
            raise RuntimeError("consumer broke")

        with pytest.raises(RuntimeError, match="consumer broke"):
            await replica(redis, keys, "a").run(failing, stop=asyncio.Event())
        assert await redis.get(keys.autofix_leader()) is None, "the lease is released"

    async def test_a_leader_whose_redis_stops_answering_ends_its_term_within_the_ttl(
        self, settings: Settings, own_valkey: EmbeddedServer, keys: Keys
    ) -> None:
        # A retrying client keeps a renewal waiting for seconds; the term still ends in time.
        client = redis_client(settings.redis, own_valkey.url, decode_responses=True)
        ttl = timedelta(milliseconds=1200)
        tenure, stop = Tenure(), asyncio.Event()
        task = asyncio.create_task(Leadership(client, keys, owner="a", ttl=ttl).run(tenure.lead("a"), stop=stop))
        loop = asyncio.get_running_loop()
        try:
            await tenure.started.wait()
            await own_valkey.stop()
            stopped_at = loop.time()
            await eventually(lambda: not tenure.leading)
            assert loop.time() - stopped_at <= ttl.total_seconds() + 0.3
        finally:
            stop.set()
            task.cancel()
            await asyncio.wait([task])
            await client.aclose()
