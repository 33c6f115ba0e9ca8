from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from drydock.config import Settings
from drydock.infra.redis import Batch, Keys, redis_client


@pytest.fixture
async def one_connection(settings: Settings) -> AsyncIterator[Redis]:
    """A client whose batches all share one connection, so a batch left out of step would
    hand its replies to the next."""
    assert settings.redis.url is not None
    client = redis_client(
        settings.redis, settings.redis.url, decode_responses=True, socket_timeout=None, max_connections=1
    )
    yield client
    await client.aclose()


class TestBatch:
    async def test_replies_come_in_the_order_the_commands_were_queued(self, redis: Redis, keys: Keys) -> None:
        await redis.set(keys.team(), "defaults")
        await redis.hset(keys.thread("t1"), mapping={"kind": "coder", "repository": "acme/widgets"})
        batch = Batch(redis)
        batch.get(keys.team())
        batch.get(keys.repositories())
        batch.hget(keys.thread("t1"), "kind")
        batch.hmget(keys.thread("t1"), ["repository", "absent", "kind"])
        assert await batch.execute() == ["defaults", None, "coder", ["acme/widgets", None, "coder"]]

    async def test_set_with_nx_px_and_get(self, redis: Redis, keys: Keys) -> None:
        key = keys.delivery("github", "d1")
        first, second = Batch(redis), Batch(redis)
        first.set(key, "pending", nx=True, px=60_000, get=True)
        second.set(key, "other", nx=True, px=60_000, get=True)
        assert await first.execute() == [None]
        assert await second.execute() == ["pending"]
        assert await redis.get(key) == "pending"
        assert 0 < await redis.pttl(key) <= 60_000

        overwrite = Batch(redis)
        overwrite.set(key, "done", px=5_000)
        assert await overwrite.execute() == ["OK"]
        assert await redis.get(key) == "done"
        assert 0 < await redis.pttl(key) <= 5_000

    async def test_an_empty_batch_answers_nothing(self, redis: Redis) -> None:
        assert await Batch(redis).execute() == []

    async def test_an_error_reply_is_raised_after_every_reply_is_read(self, one_connection: Redis, keys: Keys) -> None:
        await one_connection.hset(keys.thread("t1"), "kind", "coder")
        batch = Batch(one_connection)
        batch.get(keys.thread("t1"))  # WRONGTYPE: the key holds a hash
        batch.set(keys.team(), "after the error")
        with pytest.raises(ResponseError, match="WRONGTYPE"):
            await batch.execute()

        assert await one_connection.get(keys.team()) == "after the error"
        following = Batch(one_connection)
        following.hget(keys.thread("t1"), "kind")
        assert await following.execute() == ["coder"]

    async def test_a_batch_cancelled_before_its_replies_leaves_no_reply_to_the_next(
        self, one_connection: Redis, redis: Redis, keys: Keys
    ) -> None:
        await redis.set(keys.team(), "first")
        await redis.set(keys.repositories(), "second")
        await redis.execute_command("CLIENT", "PAUSE", 300, "ALL")
        cancelled = Batch(one_connection)
        cancelled.get(keys.team())
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await cancelled.execute()

        following = Batch(one_connection)
        following.get(keys.repositories())
        assert await following.execute() == ["second"]
