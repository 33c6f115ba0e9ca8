"""The string swap script and the back-off of a lost WATCH race, shared by the stores."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from drydock.infra.compare_and_set import StringSwap, back_off
from drydock.infra.redis import Keys


class TestStringSwap:
    async def test_swaps_only_what_was_read_and_keeps_the_ttl(self, redis: Redis, keys: Keys) -> None:
        key = f"{keys.prefix}:swapped"
        await redis.set(key, "old", ex=100)
        swap = StringSwap(redis)
        assert not await swap(key, "other", "new")
        assert await redis.get(key) == "old"
        assert await swap(key, "old", "new")
        assert await redis.get(key) == "new"
        assert 90 < await redis.ttl(key) <= 100

    async def test_a_missing_key_is_not_created(self, redis: Redis, keys: Keys) -> None:
        key = f"{keys.prefix}:absent"
        assert not await StringSwap(redis)(key, "old", "new")
        assert await redis.exists(key) == 0


class TestBackOff:
    async def test_resets_the_pipeline_and_pauses_at_most_50_ms(self, redis: Redis, keys: Keys) -> None:
        key = f"{keys.prefix}:watched"
        loop = asyncio.get_running_loop()
        async with redis.pipeline(transaction=True) as pipe:
            await pipe.watch(key)
            assert pipe.watching
            started = loop.time()
            await back_off(pipe, attempt=20)
            assert loop.time() - started < 0.05 + 0.05
            assert not pipe.watching
