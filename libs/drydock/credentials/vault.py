"""The token vault: each grant's upstream token, encrypted in Redis, never in a sandbox.

A record lives under :meth:`Keys.grant_token` and expires with the token. :meth:`TokenVault.rotate`
re-encrypts every record under the newest key after a key is added, so the oldest key can
then be retired.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import cast

from redis.asyncio import Redis

from drydock.credentials.cipher import SecretCipher
from drydock.credentials.reencryption import reencrypt
from drydock.credentials.upstream_token import UpstreamToken
from drydock.infra.redis import Keys


class TokenVault:
    """Encrypted upstream tokens, one per grant (by the grant's digest)."""

    def __init__(self, redis: Redis, keys: Keys, cipher: SecretCipher) -> None:
        self._redis = redis
        self._keys = keys
        self._cipher = cipher

    async def put(self, digest: str, token: UpstreamToken) -> None:
        """Store ``token`` for the grant; the record expires when the token does."""
        ttl_ms = int((token.expires_at - datetime.now(UTC)).total_seconds() * 1000)
        if ttl_ms <= 0:
            raise ValueError(f"the upstream token expired at {token.expires_at.isoformat()}; nothing to store")
        await self._redis.set(self.key(digest), self._cipher.encrypt(token.to_json()), px=ttl_ms)

    async def get(self, digest: str) -> UpstreamToken | None:
        """The grant's token, or ``None`` when it has none (never minted, expired or deleted)."""
        return self.opened(await self.raw(digest))

    async def raw(self, digest: str) -> str | None:
        """The stored ciphertext, as it sits in Redis (for audits and tests)."""
        return cast(str | None, await self._redis.get(self.key(digest)))

    def key(self, digest: str) -> str:
        return self._keys.grant_token(digest)

    def opened(self, ciphertext: str | None) -> UpstreamToken | None:
        """The token in a record read from :meth:`key`; ``None`` for no record."""
        if ciphertext is None:
            return None
        return UpstreamToken.from_json(self._cipher.decrypt(ciphertext))

    async def delete(self, digest: str) -> None:
        await self._redis.delete(self.key(digest))

    async def rotate(self) -> int:
        """Re-encrypt every record not yet under the newest key; return how many were rewritten
        (:func:`~drydock.credentials.reencryption.reencrypt`)."""
        return await reencrypt(self._redis, self._cipher, self._keys.grant_tokens_pattern(), what="token")
