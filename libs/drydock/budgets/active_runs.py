"""The team's runs going on, for its concurrency limit.

A sorted set of thread ids scored by the time each claim lapses: a run claims a place before its
sandbox, renews it while it lives and releases it when it ends; a worker that dies leaves a
claim that lapses by itself, so a crash never keeps a place taken for good. Claiming is one
script (expire lapsed claims, count, add), so two replicas never both take the last place.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any, cast

from redis.asyncio import Redis

from drydock.infra.redis import Keys

LAPSE = timedelta(minutes=5)

_CLAIM = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
local limit = tonumber(ARGV[4])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) or limit < 0 or redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], tonumber(ARGV[2]) + tonumber(ARGV[3]), ARGV[1])
  return 1
end
return 0
"""


class ActiveRuns:
    def __init__(self, redis: Redis, keys: Keys, *, lapse: timedelta = LAPSE) -> None:
        self._redis = redis
        self._key = keys.active_runs()
        self._lapse_ms = int(lapse.total_seconds() * 1000)
        self._claim = redis.register_script(_CLAIM)

    @property
    def renew_every(self) -> float:
        """Seconds between renewals of a live claim."""
        return self._lapse_ms / 3000

    async def claim(self, thread_id: str, limit: int | None) -> bool:
        """Take (or renew) ``thread_id``'s place; False when ``limit`` runs are going on already."""
        now = int(time.time() * 1000)
        taken = await self._claim(
            keys=[self._key], args=[thread_id, now, self._lapse_ms, -1 if limit is None else limit]
        )
        return bool(taken)

    async def release(self, thread_id: str) -> None:
        await cast(Any, self._redis.zrem(self._key, thread_id))

    async def count(self) -> int:
        """Runs going on (claims not lapsed)."""
        now = int(time.time() * 1000)
        return int(await cast(Any, self._redis.zcount(self._key, now, "+inf")))
