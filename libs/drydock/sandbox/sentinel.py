"""The creation sentinel: what ``sandbox_id`` holds in thread metadata while a sandbox is made.

It records its owner (one :class:`SandboxManager` in one process) and when creation started, so
staleness is decidable. While it creates, the owner renews a liveness key with a short TTL
(:class:`CreatorHeartbeat`). A sentinel is **stale** when its owner's liveness key has expired
(the owner died or hung), when it is older than ``creation_timeout``, or when it is the reader's
own (a leftover of its own failed attempt). A sentinel that is not stale belongs to a creation in
progress in another process: the reader waits for it instead of creating a second sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta

from redis.asyncio import Redis

from drydock.infra.redis import Keys

PREFIX = "creating:"


@dataclass(frozen=True)
class CreationSentinel:
    owner: str
    started_at: float
    """Epoch seconds."""

    def encode(self) -> str:
        return PREFIX + json.dumps({"owner": self.owner, "started_at": self.started_at}, sort_keys=True)

    @classmethod
    def parse(cls, value: str) -> CreationSentinel | None:
        """The sentinel in ``value``; ``None`` if ``value`` is a sandbox id. A malformed sentinel
        parses with an empty owner (and is therefore stale)."""
        if not value.startswith(PREFIX):
            return None
        try:
            fields = json.loads(value[len(PREFIX) :])
            return cls(owner=str(fields["owner"]), started_at=float(fields["started_at"]))
        except (ValueError, KeyError, TypeError):
            return cls(owner="", started_at=0.0)

    @classmethod
    def now(cls, owner: str) -> CreationSentinel:
        return cls(owner=owner, started_at=time.time())


class CreatorHeartbeat:
    """Keeps ``owner``'s liveness key for a thread alive while it creates that thread's sandbox."""

    def __init__(self, redis: Redis, keys: Keys, *, interval: timedelta) -> None:
        self._redis = redis
        self._keys = keys
        self._interval = interval.total_seconds()

    @contextlib.asynccontextmanager
    async def beating(self, thread_id: str, owner: str) -> AsyncIterator[None]:
        """Set the key before the body runs (so the sentinel written inside is never without
        it), renew it every interval, delete it afterwards."""
        key = self._keys.sandbox_creator(thread_id, owner)
        ttl_ms = int(self._interval * 3000)
        await self._redis.set(key, "1", px=ttl_ms)
        done = asyncio.Event()

        async def renew() -> None:
            # Stopped by the event, never cancelled: cancelling a Redis command in flight can
            # leave its connection waiting for a reply that was already consumed.
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), self._interval)
                if done.is_set():
                    return
                await self._redis.set(key, "1", px=ttl_ms)

        renewer = asyncio.create_task(renew())
        try:
            yield
        finally:
            done.set()
            await renewer
            await self._redis.delete(key)

    async def alive(self, thread_id: str, owner: str) -> bool:
        return bool(owner) and bool(await self._redis.exists(self._keys.sandbox_creator(thread_id, owner)))
