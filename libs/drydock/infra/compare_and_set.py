"""Compare-and-set on Redis: the string swap script and the back-off of a lost WATCH race."""

from __future__ import annotations

import asyncio
import random

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.commands.core import AsyncScript

# Replace the value only if no one changed it since it was read; keep the key's TTL.
_SWAP = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
return 1
"""


class StringSwap:
    """``await swap(key, expected, new)``: set ``key`` to ``new`` only while it still holds
    ``expected``, keeping its TTL; True if it was written."""

    def __init__(self, redis: Redis) -> None:
        self._script: AsyncScript = redis.register_script(_SWAP)

    async def __call__(self, key: str, expected: str, new: str) -> bool:
        return bool(await self._script(keys=[key], args=[expected, new]))


async def back_off(pipe: Pipeline, attempt: int) -> None:
    """After losing a WATCH race: reset ``pipe`` and wait a jittered, growing pause (at most 50 ms)
    before ``attempt + 1``, so that writers racing on one key do not collide again in step."""
    await pipe.reset()
    await asyncio.sleep(random.uniform(0, min(0.05, 0.001 * 2 ** min(attempt, 6))))
