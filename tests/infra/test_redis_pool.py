from __future__ import annotations

import asyncio
from datetime import timedelta
from importlib import metadata

import pytest
import redis.utils
from redis.exceptions import ConnectionError as RedisConnectionError

from drydock.config import Settings
from drydock.infra.redis import connect_redis


class TestConnectionPool:
    async def test_callers_beyond_the_pool_wait_for_a_connection(self, settings: Settings) -> None:
        small = settings.redis.model_copy(update={"max_connections": 2})
        client = await connect_redis(small)
        try:
            # Each BLPOP holds its connection for 50 ms; eight of them share two connections.
            results = await asyncio.gather(*(client.blpop([f"test-pool-empty-{n}"], 0.05) for n in range(8)))
        finally:
            await client.aclose()
        assert results == [None] * 8

    async def test_a_caller_that_waits_past_the_timeout_fails_clearly(self, settings: Settings) -> None:
        small = settings.redis.model_copy(update={"max_connections": 1, "pool_timeout": timedelta(milliseconds=50)})
        client = await connect_redis(small)
        try:

            async def hold() -> None:
                await client.blpop(["test-pool-held"], 1)

            holding = asyncio.create_task(hold())
            await asyncio.sleep(0.05)
            with pytest.raises(RedisConnectionError, match="No connection available"):
                await client.get("test-pool-other")
            holding.cancel()
        finally:
            await client.aclose()


async def test_a_new_connection_sends_nothing_the_store_refuses(settings: Settings) -> None:
    """redis-py 8 asks each new RESP3 connection for maintenance notifications, which Valkey
    does not know: a round trip and a caught error for every connection a pool opens."""
    observer = await connect_redis(settings.redis)
    client = await connect_redis(settings.redis.model_copy(update={"max_connections": 4}))
    try:
        before = (await observer.info("stats"))["total_error_replies"]
        await asyncio.gather(*(client.blpop([f"test-pool-fresh-{n}"], 0.05) for n in range(4)))
        after = (await observer.info("stats"))["total_error_replies"]
    finally:
        await client.aclose()
        await observer.aclose()
    assert after == before


async def test_a_new_connection_names_its_driver_without_reading_the_package_metadata(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """redis-py reads its version from the installed package's metadata for every connection
    it makes unless it is told: milliseconds of the event loop for each connection of a burst."""
    read = 0

    def counted() -> str:
        nonlocal read
        read += 1
        return "0.0.0"

    monkeypatch.setattr(redis.utils, "get_lib_version", counted)
    client = await connect_redis(settings.redis.model_copy(update={"max_connections": 4}))
    try:
        await asyncio.gather(*(client.blpop([f"test-pool-driver-{n}"], 0.05) for n in range(4)))
        named = await client.client_info()
    finally:
        await client.aclose()
    assert read == 0
    assert (named["lib-name"], named["lib-ver"]) == ("redis-py", metadata.version("redis"))
