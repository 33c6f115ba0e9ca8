"""In production a service refuses a Redis that keeps nothing across a restart, unless the
operator accepts it; the server is a private embedded Valkey whose configuration the tests change."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from drydock.config import Environment, Settings
from drydock.embedded import valkey_server
from drydock.infra.persistence import persistence, require_persistence
from drydock.infra.redis import StoreUnavailable, connect_redis


@pytest.fixture
async def own_redis(settings: Settings) -> AsyncIterator[Redis]:
    with tempfile.TemporaryDirectory(prefix="drydock-persistence-") as tmp:
        server = valkey_server(Path(tmp))
        await server.start()
        client = await connect_redis(settings.redis, url=server.url)
        try:
            yield client
        finally:
            await client.aclose()
            await server.stop()


def production(settings: Settings, *, accept_ephemeral: bool = False) -> Settings:
    redis = settings.redis.model_copy(update={"accept_ephemeral": accept_ephemeral})
    return settings.model_copy(update={"environment": Environment.PRODUCTION, "redis": redis})


class TestRequirePersistence:
    async def test_production_refuses_a_store_without_aof_or_saves(self, own_redis: Redis, settings: Settings) -> None:
        await own_redis.config_set("appendonly", "no")
        await own_redis.config_set("save", "")

        with pytest.raises(StoreUnavailable, match="DRYDOCK_REDIS_ACCEPT_EPHEMERAL"):
            await require_persistence(own_redis, production(settings))

    async def test_the_operator_may_accept_it(self, own_redis: Redis, settings: Settings) -> None:
        await own_redis.config_set("appendonly", "no")
        await own_redis.config_set("save", "")

        await require_persistence(own_redis, production(settings, accept_ephemeral=True))

    async def test_development_does_not_ask(self, own_redis: Redis, settings: Settings) -> None:
        await own_redis.config_set("save", "")

        await require_persistence(own_redis, settings)

    @pytest.mark.parametrize(("name", "value", "kind"), [("appendonly", "yes", "aof"), ("save", "3600 1", "rdb")])
    async def test_aof_or_saves_count_as_persistence(
        self, own_redis: Redis, settings: Settings, name: str, value: str, kind: str
    ) -> None:
        await own_redis.config_set("appendonly", "no")
        await own_redis.config_set("save", "")
        await own_redis.config_set(name, value)

        assert await persistence(own_redis) == kind
        await require_persistence(own_redis, production(settings))
