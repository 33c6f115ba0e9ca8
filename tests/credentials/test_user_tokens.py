"""Users' GitHub tokens on the real Valkey: encrypted at rest, expiring with the token, re-encrypted
by a key rotation. The GitHub tools' use of them (the user's, else the App's) is tested with the
tools, in ``tests/tools/test_open_pull_request.py``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from cryptography.fernet import Fernet
from redis.asyncio import Redis

from drydock.credentials.cipher import SecretCipher
from drydock.credentials.user_tokens import UserTokens
from drydock.infra.redis import Keys

TOKEN = "ghu_0123456789abcdefghijklmnopqrstuvwxyz"


@pytest.fixture
def key() -> str:
    return Fernet.generate_key().decode()


@pytest.fixture
def tokens(redis: Redis, keys: Keys, key: str) -> UserTokens:
    return UserTokens(redis, keys, SecretCipher([key]))


class TestStorage:
    async def test_a_stored_token_reads_back_and_is_encrypted_at_rest(self, tokens: UserTokens) -> None:
        await tokens.put("user-1", TOKEN)

        assert await tokens.get("user-1") == TOKEN
        raw = await tokens.raw("user-1")
        assert raw is not None
        assert TOKEN not in raw

    async def test_a_token_with_an_expiry_is_forgotten_then(self, tokens: UserTokens, redis: Redis, keys: Keys) -> None:
        await tokens.put("user-1", TOKEN, datetime.now(UTC) + timedelta(hours=8))

        ttl_ms = await redis.pttl(keys.user_token("github", "user-1"))
        assert timedelta(hours=7, minutes=59) < timedelta(milliseconds=ttl_ms) <= timedelta(hours=8)

    async def test_an_expired_token_is_refused(self, tokens: UserTokens) -> None:
        with pytest.raises(ValueError, match="expired"):
            await tokens.put("user-1", TOKEN, datetime.now(UTC) - timedelta(seconds=1))

        assert await tokens.get("user-1") is None

    async def test_delete(self, tokens: UserTokens) -> None:
        await tokens.put("user-1", TOKEN)

        assert await tokens.delete("user-1") is True
        assert await tokens.delete("user-1") is False
        assert await tokens.get("user-1") is None

    async def test_a_record_no_key_can_read_counts_as_none(self, redis: Redis, keys: Keys, tokens: UserTokens) -> None:
        await tokens.put("user-1", TOKEN)
        stranger = UserTokens(redis, keys, SecretCipher([Fernet.generate_key().decode()]))

        assert await stranger.get("user-1") is None


class TestRotation:
    async def test_rotate_re_encrypts_under_the_newest_key(self, redis: Redis, keys: Keys, key: str) -> None:
        await UserTokens(redis, keys, SecretCipher([key])).put("user-1", TOKEN, datetime.now(UTC) + timedelta(hours=1))
        await UserTokens(redis, keys, SecretCipher([key])).put("user-2", "ghu_second")
        newest = Fernet.generate_key().decode()
        rotating = UserTokens(redis, keys, SecretCipher([newest, key]))

        assert await rotating.rotate() == 2
        assert await rotating.rotate() == 0

        only_newest = UserTokens(redis, keys, SecretCipher([newest]))
        assert (await only_newest.get("user-1"), await only_newest.get("user-2")) == (TOKEN, "ghu_second")
        assert await redis.pttl(keys.user_token("github", "user-1")) > 0
