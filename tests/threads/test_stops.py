"""Stop requests on real Valkey: taken once, by whoever runs the thread."""

from __future__ import annotations

from datetime import timedelta

from redis.asyncio import Redis

from drydock.infra.redis import Keys
from drydock.threads.stops import StopRequests


class TestStopRequests:
    async def test_a_request_is_taken_once(self, redis: Redis, keys: Keys, thread_id: str) -> None:
        stops = StopRequests(redis, keys)
        assert await stops.take(thread_id) is None
        await stops.request(thread_id, by="ada")
        assert await stops.pending(thread_id) is True
        assert await stops.take(thread_id) == "ada"
        assert await stops.take(thread_id) is None
        assert await stops.pending(thread_id) is False

    async def test_an_unclaimed_request_expires(self, redis: Redis, keys: Keys, thread_id: str) -> None:
        await StopRequests(redis, keys, ttl=timedelta(milliseconds=50)).request(thread_id, by="ada")
        assert await redis.pttl(keys.thread_stop(thread_id)) <= 50
