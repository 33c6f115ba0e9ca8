from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from drydock.config import Settings
from drydock.infra.redis import Batch, BatchConnections, Keys
from tests.waiting import eventually


@pytest.fixture
async def connections(redis: Redis) -> AsyncIterator[BatchConnections]:
    """Batches run one after another here, so they all share one connection: a batch left out
    of step would hand its replies to the next."""
    connections = BatchConnections(redis)
    yield connections
    await connections.aclose()


class TestBatch:
    async def test_replies_come_in_the_order_the_commands_were_queued(
        self, redis: Redis, connections: BatchConnections, keys: Keys
    ) -> None:
        await redis.set(keys.team(), "defaults")
        await redis.hset(keys.thread("t1"), mapping={"kind": "coder", "repository": "acme/widgets"})
        batch = Batch(connections)
        batch.get(keys.team())
        batch.get(keys.repositories())
        batch.hget(keys.thread("t1"), "kind")
        batch.hmget(keys.thread("t1"), ["repository", "absent", "kind"])
        assert await batch.execute() == ["defaults", None, "coder", ["acme/widgets", None, "coder"]]

    async def test_set_with_nx_px_and_get(self, redis: Redis, connections: BatchConnections, keys: Keys) -> None:
        key = keys.delivery("github", "d1")
        first, second = Batch(connections), Batch(connections)
        first.set(key, "pending", nx=True, px=60_000, get=True)
        second.set(key, "other", nx=True, px=60_000, get=True)
        assert await first.execute() == [None]
        assert await second.execute() == ["pending"]
        assert await redis.get(key) == "pending"
        assert 0 < await redis.pttl(key) <= 60_000

        overwrite = Batch(connections)
        overwrite.set(key, "done", px=5_000)
        assert await overwrite.execute() == ["OK"]
        assert await redis.get(key) == "done"
        assert 0 < await redis.pttl(key) <= 5_000

    async def test_an_empty_batch_answers_nothing(self, connections: BatchConnections) -> None:
        assert await Batch(connections).execute() == []

    async def test_an_error_reply_is_raised_after_every_reply_is_read(
        self, redis: Redis, connections: BatchConnections, keys: Keys
    ) -> None:
        await redis.hset(keys.thread("t1"), "kind", "coder")
        batch = Batch(connections)
        batch.get(keys.thread("t1"))  # WRONGTYPE: the key holds a hash
        batch.set(keys.team(), "after the error")
        with pytest.raises(ResponseError, match="WRONGTYPE"):
            await batch.execute()

        assert await redis.get(keys.team()) == "after the error"
        following = Batch(connections)
        following.hget(keys.thread("t1"), "kind")
        assert await following.execute() == ["coder"]

    async def test_a_batch_cancelled_before_its_replies_leaves_no_reply_to_the_next(
        self, connections: BatchConnections, redis: Redis, keys: Keys
    ) -> None:
        await redis.set(keys.team(), "first")
        await redis.set(keys.repositories(), "second")
        await redis.execute_command("CLIENT", "PAUSE", 300, "ALL")
        cancelled = Batch(connections)
        cancelled.get(keys.team())
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await cancelled.execute()

        following = Batch(connections)
        following.get(keys.repositories())
        assert await following.execute() == ["second"]

    async def test_connections_are_reused_and_closed(self, redis: Redis, settings: Settings, keys: Keys) -> None:
        name = f"batch-{keys.prefix}"
        named = Redis.from_url(str(settings.redis.url), decode_responses=True, client_name=name)
        connections = BatchConnections(named)

        async def on_the_server() -> int:
            return sum(client["name"] == name for client in await redis.client_list())

        async def all_closed() -> bool:
            return await on_the_server() == 0

        try:
            for _ in range(3):
                batch = Batch(connections)
                batch.get(keys.team())
                await batch.execute()
            assert await on_the_server() == 1

            first, second = Batch(connections), Batch(connections)
            first.get(keys.team())
            second.get(keys.team())
            await asyncio.gather(first.execute(), second.execute())
            assert await on_the_server() == 2

            await connections.aclose()
            # The server drops a connection when it reads the close, which can come after a
            # command sent later on another connection.
            await eventually(all_closed, what="the batch connections closed on the server")
        finally:
            await connections.aclose()
            await named.aclose()

    async def test_a_connection_closed_by_the_server_is_connected_again(
        self, redis: Redis, settings: Settings, keys: Keys
    ) -> None:
        await redis.set(keys.team(), "defaults")
        named = Redis.from_url(str(settings.redis.url), decode_responses=True, client_name="batch-under-test")
        connections = BatchConnections(named)
        try:
            batch = Batch(connections)
            batch.get(keys.team())
            await batch.execute()
            (client,) = [c for c in await redis.client_list() if c["name"] == "batch-under-test"]
            await redis.client_kill_filter(_id=client["id"])

            failed = Batch(connections)
            failed.get(keys.team())
            with pytest.raises(RedisConnectionError):
                await failed.execute()
            following = Batch(connections)
            following.get(keys.team())
            assert await following.execute() == ["defaults"]
        finally:
            await connections.aclose()
            await named.aclose()
