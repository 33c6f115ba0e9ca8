"""Users' own GitHub OAuth tokens, encrypted at rest (DESIGN.md section 5).

A token is stored under :meth:`Keys.user_token` as ciphertext of the newest key
(:class:`SecretCipher`), with the token's expiry as the record's TTL when it has one. It is
decrypted only into memory, when a run acts on GitHub for its user; the GitHub tools fall back
to the App's installation token when the user stored none or GitHub refuses theirs
(:meth:`drydock.tools.github_access.GithubAccess.as_user_or_app`).
:meth:`UserTokens.rotate` re-encrypts the records after a key is added, as the token vault does;
the credential proxy runs both at its start.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

import structlog
from redis.asyncio import Redis

from drydock.credentials.cipher import CipherError, SecretCipher
from drydock.credentials.reencryption import reencrypt
from drydock.infra.redis import Keys

if TYPE_CHECKING:
    from drydock.github import GithubClient

log = structlog.get_logger(__name__)

PROVIDER = "github"


class UserTokens:
    """Users' GitHub OAuth tokens, one per Drydock user."""

    def __init__(self, redis: Redis, keys: Keys, cipher: SecretCipher) -> None:
        self._redis = redis
        self._keys = keys
        self._cipher = cipher

    def _key(self, user_id: str) -> str:
        if not user_id:
            raise ValueError("a user id is required")
        return self._keys.user_token(PROVIDER, user_id)

    async def put(self, user_id: str, token: str, expires_at: datetime | None = None) -> None:
        """Store ``token`` for the user, replacing an earlier one; it is forgotten at ``expires_at``."""
        if not token:
            raise ValueError("an empty token cannot be stored")
        ttl_ms: int | None = None
        if expires_at is not None:
            ttl_ms = int((expires_at - datetime.now(UTC)).total_seconds() * 1000)
            if ttl_ms <= 0:
                raise ValueError(f"the token expired at {expires_at.isoformat()}; nothing to store")
        record = json.dumps({"token": token, "expires_at": expires_at.isoformat() if expires_at else None})
        await self._redis.set(self._key(user_id), self._cipher.encrypt(record), px=ttl_ms)

    async def get(self, user_id: str) -> str | None:
        """The user's token, or ``None`` when they stored none (or it expired). A record no
        configured key can decrypt counts as none, and is logged."""
        ciphertext = await self.raw(user_id)
        if ciphertext is None:
            return None
        try:
            record = json.loads(self._cipher.decrypt(ciphertext))
        except CipherError:
            log.warning("stored user token undecryptable with the configured keys", user_id=user_id)
            return None
        return str(record["token"])

    async def raw(self, user_id: str) -> str | None:
        """The stored ciphertext, as it sits in Redis (for audits and tests)."""
        return cast(str | None, await self._redis.get(self._key(user_id)))

    async def delete(self, user_id: str) -> bool:
        """Forget the user's token; False if there was none."""
        return bool(await self._redis.delete(self._key(user_id)))

    async def rotate(self) -> int:
        """Re-encrypt every record not yet under the newest key; return how many were rewritten
        (:func:`~drydock.credentials.reencryption.reencrypt`)."""
        return await reencrypt(self._redis, self._cipher, self._keys.user_tokens_pattern(), what="user token")


async def app_authorization(github: GithubClient, repository: str) -> str:
    """The ``Authorization`` header of the App's installation on ``repository``."""
    return await github.app_authorization(repository)
