"""The team's active runs: a claim per thread up to the limit, renewed by its holder, given back,
and lapsing by itself when its holder is gone."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from redis.asyncio import Redis

from drydock.budgets import ActiveRuns
from drydock.infra.redis import Keys


class TestActiveRuns:
    async def test_claims_up_to_the_limit(self, redis: Redis, keys: Keys) -> None:
        active = ActiveRuns(redis, keys)
        assert await active.claim("a", 2)
        assert await active.claim("b", 2)
        assert not await active.claim("c", 2)
        assert await active.claim("a", 2), "a holder renews its own place"
        await active.release("a")
        assert await active.claim("c", 2)
        assert await active.count() == 2

    async def test_no_limit_counts_every_run(self, redis: Redis, keys: Keys) -> None:
        active = ActiveRuns(redis, keys)
        for thread in ("a", "b", "c"):
            assert await active.claim(thread, None)
        assert await active.count() == 3

    async def test_only_one_of_many_racing_claims_takes_the_last_place(self, redis: Redis, keys: Keys) -> None:
        active = ActiveRuns(redis, keys)
        taken = await asyncio.gather(*(active.claim(f"t{i}", 1) for i in range(20)))
        assert sum(taken) == 1

    async def test_a_claim_lapses_when_its_holder_is_gone(self, redis: Redis, keys: Keys) -> None:
        active = ActiveRuns(redis, keys, lapse=timedelta(milliseconds=200))
        assert await active.claim("crashed", 1)
        assert not await active.claim("next", 1)
        deadline = asyncio.get_running_loop().time() + 5
        while not await active.claim("next", 1):
            assert asyncio.get_running_loop().time() < deadline, "the lapsed claim was never dropped"
            await asyncio.sleep(0.05)
        assert await active.count() == 1
