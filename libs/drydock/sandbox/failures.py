"""Consecutive failures to give a thread a sandbox, counted in Redis so that any process (the
coder's circuit-breaker middleware) can read them. A success resets the count."""

from __future__ import annotations

from datetime import timedelta

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from drydock.infra.redis import Keys


class SandboxFailures:
    def __init__(self, redis: Redis, keys: Keys, *, retention: timedelta = timedelta(days=1)) -> None:
        self._redis = redis
        self._keys = keys
        self._retention = retention

    async def count(self, thread_id: str) -> int:
        value = await self._redis.get(self._keys.sandbox_failures(thread_id))
        return int(value) if value else 0

    async def record(self, thread_id: str) -> int:
        """Count one more failure; the new count. The count expires ``retention`` after the last failure."""
        key = self._keys.sandbox_failures(thread_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.incr(key)
            pipe.expire(key, self._retention)
            count, _ = await pipe.execute()
        return int(count)

    async def reset(self, thread_id: str) -> None:
        await self._redis.delete(self._keys.sandbox_failures(thread_id))

    def queue_reset(self, pipe: Pipeline, thread_id: str) -> None:
        """:meth:`reset` in a caller's round trip."""
        pipe.delete(self._keys.sandbox_failures(thread_id))
