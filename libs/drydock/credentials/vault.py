"""The token vault: each grant's upstream token, encrypted in Redis, never in a sandbox.

A record lives under :meth:`Keys.grant_token` and expires with the token. :meth:`TokenVault.rotate`
re-encrypts every record under the newest key after a key is added, so the oldest key can
then be retired.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import cast

import structlog
from redis.asyncio import Redis

from drydock.credentials.cipher import CipherError, SecretCipher
from drydock.credentials.upstream_token import UpstreamToken
from drydock.infra.compare_and_set import StringSwap
from drydock.infra.redis import Keys

log = structlog.get_logger(__name__)


class TokenVault:
    """Encrypted upstream tokens, one per grant (by the grant's digest)."""

    def __init__(self, redis: Redis, keys: Keys, cipher: SecretCipher) -> None:
        self._redis = redis
        self._keys = keys
        self._cipher = cipher
        self._swap = StringSwap(redis)

    async def put(self, digest: str, token: UpstreamToken) -> None:
        """Store ``token`` for the grant; the record expires when the token does."""
        ttl_ms = int((token.expires_at - datetime.now(UTC)).total_seconds() * 1000)
        if ttl_ms <= 0:
            raise ValueError(f"the upstream token expired at {token.expires_at.isoformat()}; nothing to store")
        await self._redis.set(self._keys.grant_token(digest), self._cipher.encrypt(token.to_json()), px=ttl_ms)

    async def get(self, digest: str) -> UpstreamToken | None:
        """The grant's token, or ``None`` when it has none (never minted, expired or deleted)."""
        ciphertext = await self.raw(digest)
        if ciphertext is None:
            return None
        return UpstreamToken.from_json(self._cipher.decrypt(ciphertext))

    async def raw(self, digest: str) -> str | None:
        """The stored ciphertext, as it sits in Redis (for audits and tests)."""
        return cast(str | None, await self._redis.get(self._keys.grant_token(digest)))

    async def delete(self, digest: str) -> None:
        await self._redis.delete(self._keys.grant_token(digest))

    async def rotate(self) -> int:
        """Re-encrypt every record not yet under the newest key; return how many were rewritten.

        Safe while the proxy runs: a record changed in the meantime is left as its writer left
        it (already under the newest key). A record no configured key can read is skipped.
        """
        rewritten = 0
        async for key in self._redis.scan_iter(match=self._keys.grant_tokens_pattern(), count=500):
            ciphertext = cast(str | None, await self._redis.get(key))
            if ciphertext is None or self._cipher.is_current(ciphertext):
                continue
            try:
                fresh = self._cipher.rotate(ciphertext)
            except CipherError:
                # Written under a key no longer configured: unreadable, and gone when the token expires.
                log.warning("stored token undecryptable with the configured keys", key=key)
                continue
            if await self._swap(key, ciphertext, fresh):
                rewritten += 1
        return rewritten
