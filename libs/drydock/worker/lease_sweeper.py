"""Resumes threads whose run's holder died: a lease that expired without being released.

The wake of a dead worker's run is redelivered only after its ack wait (a minute by default,
longer with backoff). The sweeper looks every ``interval`` for leases that expired without a
release (:meth:`Keys.leases_held`) and wakes their threads at once, so a crashed run resumes
within the lease TTL plus about one interval. Every worker sweeps; removing the index entry
decides which one wakes the thread.
"""

from __future__ import annotations

import time
from typing import cast

import structlog
from redis.asyncio import Redis
from redis.exceptions import RedisError

from drydock.bus import Bus, Wake
from drydock.errors import describe
from drydock.infra.cancellation import pause
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.threads.metadata import ThreadMetadataStore

log = structlog.get_logger(__name__)

RESUME = "resume"
"""The reason of a wake the sweeper sends."""


class LeaseSweeper:
    def __init__(self, bus: Bus, redis: Redis, keys: Keys, *, role: Role, interval: float = 1.0) -> None:
        self._bus = bus
        self._role = role
        self._redis = redis
        self._keys = keys
        self._metadata = ThreadMetadataStore(redis, keys)
        self._interval = interval
        self._stopping = False

    async def sweep(self) -> list[str]:
        """Wake every thread of this sweeper's role whose lease expired unreleased; returns their ids."""
        now_ms = int(time.time() * 1000)
        held = self._keys.leases_held()
        expired = cast(list[str], await self._redis.zrangebyscore(held, 0, now_ms, start=0, num=100))
        woken = []
        for thread_id in expired:
            if await self._redis.exists(self._keys.lease(thread_id)):
                continue
            thread = await self._metadata.find(thread_id)
            kind = thread.kind if thread is not None else None
            # Another role's thread stays in the index for that role's workers, who may wake it.
            if kind is not None and kind is not self._role:
                continue
            if not await self._redis.zrem(held, thread_id):
                continue
            if kind is None:
                log.warning("expired lease of an unknown thread", thread_id=thread_id)
                continue
            await self._bus.wake(Wake(thread_id=thread_id, role=kind, reason=RESUME))
            log.info("thread resumed: its lease expired without a release", thread_id=thread_id, role=kind.value)
            woken.append(thread_id)
        return woken

    async def run(self) -> None:
        """Sweep every interval until cancelled or :meth:`stop` is called."""
        while not self._stopping:
            try:
                await self.sweep()
            except (RedisError, OSError) as error:
                log.warning("lease sweep failed", error=describe(error))
            await pause(self._interval)

    def stop(self) -> None:
        self._stopping = True
