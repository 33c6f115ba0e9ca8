"""The embedded Valkey answers only its user, with its password."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from drydock.config import RedisSettings
from drydock.embedded import REDIS_USER, EmbeddedUrls
from drydock.infra.redis import StoreUnavailable, connect_redis


class TestRedisAuthentication:
    async def test_a_client_without_the_password_is_refused(self, infra: EmbeddedUrls) -> None:
        with pytest.raises(StoreUnavailable, match=r"(?i)auth"):
            await connect_redis(RedisSettings(url=infra.redis_address))

    async def test_a_wrong_password_is_refused_and_not_shown(self, infra: EmbeddedUrls) -> None:
        settings = RedisSettings(url=infra.redis_address, username=REDIS_USER, password=SecretStr("wrong-secret"))
        with pytest.raises(StoreUnavailable) as raised:
            await connect_redis(settings)
        assert "wrong-secret" not in str(raised.value)
        wrong_url = f"redis://{REDIS_USER}:wrong-secret@{str(infra.redis_address).split('://')[1]}"
        with pytest.raises(StoreUnavailable) as raised:
            await connect_redis(RedisSettings(url=wrong_url))
        assert "wrong-secret" not in str(raised.value)

    async def test_the_user_and_password_from_settings_are_admitted(self, infra: EmbeddedUrls) -> None:
        assert infra.redis is not None
        password = infra.redis.split("://", 1)[1].rsplit("@", 1)[0].split(":", 1)[1]
        settings = RedisSettings(url=infra.redis_address, username=REDIS_USER, password=SecretStr(password))
        client = await connect_redis(settings)
        try:
            assert await client.ping()
        finally:
            await client.aclose()
