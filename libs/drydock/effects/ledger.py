"""The effects ledger in Redis: one hash per effect, claimed before the write and completed with
the write's result after it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from redis.asyncio import Redis

from drydock.infra.redis import Keys

RETENTION = timedelta(days=14)
"""How long an effect is remembered: longer than any run is retried."""


@dataclass(frozen=True)
class LedgerEntry:
    done: bool
    result: dict[str, Any] | None
    """The write's result once done."""


class EffectLedger:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys

    async def claim(self, thread_id: str, effect_id: str) -> LedgerEntry | None:
        """Claim the effect; ``None`` when it is new, else what an earlier attempt left."""
        key = self._keys.effect(thread_id, effect_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hsetnx(key, "state", "claimed")
            pipe.expire(key, RETENTION)
            pipe.hgetall(key)
            created, _, fields = await pipe.execute()
        if created:
            return None
        result = fields.get("result")
        return LedgerEntry(done=result is not None, result=json.loads(result) if result is not None else None)

    async def record(self, thread_id: str, effect_id: str, result: dict[str, Any]) -> None:
        """Record the write's result: a later claim returns it instead of writing."""
        key = self._keys.effect(thread_id, effect_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={"state": "done", "result": json.dumps(result)})
            pipe.expire(key, RETENTION)
            await pipe.execute()
