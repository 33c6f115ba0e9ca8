"""A fenced lease in Redis: one holder at a time, renewed while it lives.

A lease is a key holding ``owner|fence`` with a TTL. Each acquisition takes a new fence from a
counter that only grows, so a write stamped with an older fence can be recognised and refused
after the lease has moved on. Renew and release act only while the key still holds the
holder's token. The per-thread lease (:mod:`drydock.threads.lease`) and the autofix
controller's leadership (:mod:`drydock.autofix.leadership`) are both this lease on their own keys.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta

import structlog
from redis.asyncio import Redis
from redis.exceptions import RedisError

from drydock.errors import describe
from drydock.infra.cancellation import pause

_ACQUIRE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local fence = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. fence, 'PX', ARGV[2])
return fence
"""

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def check_owner(owner: str) -> None:
    if "|" in owner:
        raise ValueError("an owner name cannot contain '|'")


def token(owner: str, fence: int) -> str:
    """What the lease key holds while ``owner`` holds it with ``fence``."""
    return f"{owner}|{fence}"


class FencedLeases:
    """The acquire, renew and release scripts for leases of one TTL.

    A lease key and its fence counter must share a Redis Cluster slot (one hash tag)."""

    def __init__(self, redis: Redis, *, ttl: timedelta) -> None:
        self.ttl = ttl
        self.ttl_ms = int(ttl.total_seconds() * 1000)
        self._acquire = redis.register_script(_ACQUIRE)
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)

    async def acquire(self, key: str, fence_key: str, owner: str) -> int | None:
        """Take the lease if nobody holds it and return its new fence; ``None`` if someone does."""
        check_owner(owner)
        fence = await self._acquire(keys=[key, fence_key], args=[owner, str(self.ttl_ms)])
        return int(fence) if fence else None

    async def renew(self, key: str, held: str) -> bool:
        """Extend the lease held with token ``held`` by the TTL; False if it is no longer held so."""
        return bool(await self._renew(keys=[key], args=[held, str(self.ttl_ms)]))

    async def release(self, key: str, held: str) -> bool:
        """Give up the lease held with token ``held``; False if it was no longer held so."""
        return bool(await self._release(keys=[key], args=[held]))


async def keep_renewed(renew: Callable[[], Awaitable[bool]], ttl: timedelta, log: structlog.stdlib.BoundLogger) -> None:
    """Call ``renew`` every third of ``ttl`` and return once the lease is lost.

    Lost means ``renew`` answered False, or Redis failed or stayed silent until just before the
    lease would expire: the holder then stops slightly before the TTL, so that no other can
    already hold the lease while it still acts. A swallowed cancellation ends the loop too
    (:func:`~drydock.infra.cancellation.pause`)."""
    seconds = ttl.total_seconds()
    interval = seconds / 3
    valid_until = time.monotonic() + seconds
    margin = min(interval / 2, 1.0)
    while True:
        # Not past the margin: after failed renewals the last try must still come before it.
        await pause(min(interval, max(0.0, valid_until - margin - time.monotonic())))
        try:
            # The client retries a lost connection for seconds; a renewal still retrying when
            # the lease runs out must not keep the holder running past it.
            bound = max(0.01, valid_until - margin - time.monotonic())
            if not await asyncio.wait_for(renew(), bound):
                break
            valid_until = time.monotonic() + seconds
        except (RedisError, OSError) as error:
            log.warning("lease renewal failed", error=describe(error))
            if time.monotonic() >= valid_until - margin:
                break
            await asyncio.sleep(min(0.2, interval / 4))
    log.warning("lease lost")
