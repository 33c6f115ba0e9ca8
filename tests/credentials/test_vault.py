from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from cryptography.fernet import Fernet
from redis.asyncio import Redis

from drydock.credentials import CipherError, SecretCipher, TokenVault, UpstreamToken
from drydock.infra.redis import Keys


def _token(value: str = "ghs_vaulted", lifetime: timedelta = timedelta(hours=1)) -> UpstreamToken:
    return UpstreamToken(
        token=value,
        expires_at=datetime.now(UTC) + lifetime,
        permissions={"contents": "read"},
        repositories=("acme/widgets",),
    )


async def _plaintext(vault: TokenVault, name: str) -> str | None:
    stored = await vault.get(name)
    return stored.token if stored is not None else None


class TestTokenVault:
    async def test_stores_ciphertext_only_and_reads_it_back(self, redis: Redis, keys: Keys) -> None:
        vault = TokenVault(redis, keys, SecretCipher([Fernet.generate_key().decode()]))
        token = _token()
        await vault.put("d1", token)
        raw = await redis.get(keys.grant_token("d1"))
        assert raw is not None
        assert "ghs_vaulted" not in raw
        assert await vault.get("d1") == token

    async def test_record_expires_with_the_token(self, redis: Redis, keys: Keys) -> None:
        vault = TokenVault(redis, keys, SecretCipher([Fernet.generate_key().decode()]))
        await vault.put("d1", _token(lifetime=timedelta(minutes=10)))
        ttl = await redis.pttl(keys.grant_token("d1"))
        assert 9 * 60_000 < ttl <= 10 * 60_000

    async def test_an_expired_token_is_not_stored(self, redis: Redis, keys: Keys) -> None:
        vault = TokenVault(redis, keys, SecretCipher([Fernet.generate_key().decode()]))
        with pytest.raises(ValueError, match="expired"):
            await vault.put("d1", _token(lifetime=timedelta(seconds=-1)))

    async def test_missing_record_is_none(self, redis: Redis, keys: Keys) -> None:
        vault = TokenVault(redis, keys, SecretCipher([Fernet.generate_key().decode()]))
        assert await vault.get("absent") is None


class TestKeyRotation:
    async def test_old_ciphertexts_stay_readable_then_rotate_to_the_new_key(self, redis: Redis, keys: Keys) -> None:
        old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
        await TokenVault(redis, keys, SecretCipher([old])).put("a", _token("ghs_a"))
        await TokenVault(redis, keys, SecretCipher([old])).put("b", _token("ghs_b"))
        ring = TokenVault(redis, keys, SecretCipher([new, old]))
        await ring.put("c", _token("ghs_c"))

        assert [await _plaintext(ring, name) for name in "abc"] == ["ghs_a", "ghs_b", "ghs_c"]
        ttl_before = await redis.pttl(keys.grant_token("a"))

        assert await ring.rotate() == 2
        assert await ring.rotate() == 0
        only_new = TokenVault(redis, keys, SecretCipher([new]))
        assert [await _plaintext(only_new, name) for name in "abc"] == ["ghs_a", "ghs_b", "ghs_c"]
        assert 0 < await redis.pttl(keys.grant_token("a")) <= ttl_before

    async def test_without_the_old_key_a_record_is_a_clear_error(self, redis: Redis, keys: Keys) -> None:
        old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
        await TokenVault(redis, keys, SecretCipher([old])).put("a", _token())
        with pytest.raises(CipherError, match="cannot be decrypted"):
            await TokenVault(redis, keys, SecretCipher([new])).get("a")

    async def test_rotation_skips_what_no_key_can_read(self, redis: Redis, keys: Keys) -> None:
        retired, old, new = (Fernet.generate_key().decode() for _ in range(3))
        await TokenVault(redis, keys, SecretCipher([retired])).put("lost", _token("ghs_lost"))
        await TokenVault(redis, keys, SecretCipher([old])).put("kept", _token("ghs_kept"))
        ring = TokenVault(redis, keys, SecretCipher([new, old]))
        assert await ring.rotate() == 1
        assert await _plaintext(TokenVault(redis, keys, SecretCipher([new])), "kept") == "ghs_kept"
