"""A shared, short-lived cache of GitHub organization membership answers.

Asking GitHub whether a commenter belongs to an allowed organization costs an API call; the
answer is kept in Redis (not per replica) for a few minutes, so every replica agrees.
"""

from __future__ import annotations

from datetime import timedelta
from typing import cast

from redis.asyncio import Redis

from drydock.infra.redis import Keys


class MembershipCache:
    def __init__(self, redis: Redis, keys: Keys, *, host: str, ttl: timedelta) -> None:
        self._redis = redis
        self._keys = keys
        self._host = host
        self._ttl_ms = int(ttl.total_seconds() * 1000)

    async def get(self, org: str, login: str) -> bool | None:
        """The cached answer, or ``None`` when GitHub must be asked."""
        value = cast(str | None, await self._redis.get(self._keys.org_member(self._host, org, login)))
        return None if value is None else value == "1"

    async def put(self, org: str, login: str, member: bool) -> None:
        await self._redis.set(self._keys.org_member(self._host, org, login), "1" if member else "0", px=self._ttl_ms)
