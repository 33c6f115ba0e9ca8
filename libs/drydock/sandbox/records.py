"""Sandbox records in Redis: one hash per sandbox (its handle) and one index scored by last use.

The record is what lets another worker reconnect by id, and what the reaper walks. It holds the
daemon's token, so the Redis instance must be as private as the sandboxes themselves. Writes
touch the record before the index and deletes the index before the record, so a reader that
finds an id in the index without a record simply skips it.
"""

from __future__ import annotations

import time
from typing import Any, cast

from redis.asyncio import Redis

from drydock.infra.redis import Keys
from drydock.sandbox.errors import SandboxNotFound
from drydock.sandbox.handle import SandboxHandle


class SandboxRecords:
    """The one place that reads and writes sandbox records."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys

    @property
    def redis(self) -> Redis:
        """The connection, for a provider's own keys next to the records (the warm pool)."""
        return self._redis

    @property
    def keys(self) -> Keys:
        return self._keys

    async def put(self, handle: SandboxHandle) -> None:
        record: dict[Any, str] = handle.to_record()
        await self._redis.hset(self._keys.sandbox(handle.id), mapping=record)
        await self._redis.zadd(self._keys.sandboxes(), {handle.id: time.time()})

    async def get(self, sandbox_id: str) -> SandboxHandle | None:
        record = cast(dict[str, str], await self._redis.hgetall(self._keys.sandbox(sandbox_id)))
        return SandboxHandle.from_record(record) if record else None

    async def require(self, sandbox_id: str, *, provider: str, label: str, value: str, place: str) -> SandboxHandle:
        """The record of a sandbox of ``provider`` whose ``label`` is ``value`` (its host or
        namespace, named ``place`` in the error); :class:`SandboxNotFound` otherwise."""
        handle = await self.get(sandbox_id)
        if handle is None:
            raise SandboxNotFound(sandbox_id, "no record")
        if handle.provider != provider:
            raise SandboxNotFound(sandbox_id, f"it belongs to the {handle.provider} provider")
        if handle.labels.get(label) != value:
            raise SandboxNotFound(sandbox_id, f"it runs {place} {handle.labels.get(label)}")
        return handle

    async def remove(self, sandbox_id: str) -> None:
        await self._redis.zrem(self._keys.sandboxes(), sandbox_id)
        await self._redis.delete(self._keys.sandbox(sandbox_id))

    async def touch(self, sandbox_id: str, *, at: float | None = None) -> None:
        """Record a use of the sandbox now (or ``at``); a removed sandbox stays removed."""
        await self._redis.zadd(self._keys.sandboxes(), {sandbox_id: time.time() if at is None else at}, xx=True)

    async def last_used(self, sandbox_id: str) -> float | None:
        score = await self._redis.zscore(self._keys.sandboxes(), sandbox_id)
        return None if score is None else float(score)

    async def all(self, *, provider: str | None = None) -> list[SandboxHandle]:
        """Every recorded sandbox (of ``provider``), oldest use first."""
        ids = cast(list[str], await self._redis.zrange(self._keys.sandboxes(), 0, -1))
        handles = []
        for sandbox_id in ids:
            handle = await self.get(sandbox_id)
            if handle is not None and (provider is None or handle.provider == provider):
                handles.append(handle)
        return handles

    async def idle_since(self, cutoff: float) -> list[str]:
        """Ids of sandboxes last used before ``cutoff`` (epoch seconds)."""
        return cast(list[str], await self._redis.zrangebyscore(self._keys.sandboxes(), "-inf", f"({cutoff}"))
