"""Moving stored ciphertexts to the newest key after a key rotation (a new key first in
``DRYDOCK_CRYPTO_KEYS``), so that the old key can be retired once every replica has started
with the new list. The token vault's and users' OAuth tokens are re-encrypted this way."""

from __future__ import annotations

from typing import cast

import structlog
from redis.asyncio import Redis

from drydock.credentials.cipher import CipherError, SecretCipher
from drydock.infra.compare_and_set import StringSwap

log = structlog.get_logger(__name__)


async def reencrypt(redis: Redis, cipher: SecretCipher, pattern: str, *, what: str) -> int:
    """Re-encrypt every string record whose key matches ``pattern`` and is not yet under the
    newest key; return how many were rewritten. Safe while the stores are in use: a record
    changed meanwhile is left as its writer left it (already under the newest key). A record no
    configured key can read is skipped and logged, named ``what``."""
    swap = StringSwap(redis)
    rewritten = 0
    async for key in redis.scan_iter(match=pattern, count=500):
        ciphertext = cast(str | None, await redis.get(key))
        if ciphertext is None or cipher.is_current(ciphertext):
            continue
        try:
            fresh = cipher.rotate(ciphertext)
        except CipherError:
            # Written under a key no longer configured: unreadable, and gone when it expires.
            log.warning("stored secret undecryptable with the configured keys", secret=what, key=key)
            continue
        if await swap(key, ciphertext, fresh):
            rewritten += 1
    return rewritten
