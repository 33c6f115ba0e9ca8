"""One active autofix controller at a time: a Redis lease with a TTL and a fencing counter;
the other replicas stand by and take over once the lease expires.

The per-thread :class:`~drydock.threads.Leases` are keyed by thread, so the controller has its
own key (``Keys.autofix_leader``) with the same scripts' shape. The leader renews every third of
the TTL; when renewal fails or Redis stays silent until the lease would expire, its term ends:
the term's ``ended`` event is set (loops that talk to Redis check it, AGENTS.md) and its task
is cancelled. Every term has a new fence, recorded on autofix's events. A deposed leader can
finish at most the decision it was making, and that is safe: opening a repair is one atomic
script and repeated dispatches carry the same message ids.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import structlog
from redis.asyncio import Redis
from redis.exceptions import RedisError

from drydock.errors import describe
from drydock.infra.redis import Keys

log = structlog.get_logger(__name__)

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


@dataclass
class Term:
    """One leader's term: its fence, and ``ended`` once it lost or gave up the lease."""

    owner: str
    fence: int
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def token(self) -> str:
        return f"{self.owner}|{self.fence}"


Lead = Callable[[Term], Coroutine[Any, Any, None]]


class Leadership:
    def __init__(self, redis: Redis, keys: Keys, *, owner: str, ttl: timedelta) -> None:
        if "|" in owner:
            raise ValueError("an owner name cannot contain '|'")
        self._keys = keys
        self.owner = owner
        self.ttl = ttl.total_seconds()
        self._ttl_ms = str(int(self.ttl * 1000))
        self._acquire = redis.register_script(_ACQUIRE)
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)

    async def acquire(self) -> Term | None:
        """Become the leader if nobody is; ``None`` if somebody is."""
        fence = await self._acquire(
            keys=[self._keys.autofix_leader(), self._keys.autofix_leader_fence()], args=[self.owner, self._ttl_ms]
        )
        return Term(self.owner, int(fence)) if fence else None

    async def renew(self, term: Term) -> bool:
        return bool(await self._renew(keys=[self._keys.autofix_leader()], args=[term.token, self._ttl_ms]))

    async def release(self, term: Term) -> bool:
        return bool(await self._release(keys=[self._keys.autofix_leader()], args=[term.token]))

    async def run(self, lead: Lead, *, stop: asyncio.Event) -> None:
        """Stand by until this replica leads, run ``lead(term)`` while it does, and stand by again
        when the lease is lost; until ``stop`` is set. An error of ``lead`` ends the term and is raised.

        Setting ``stop`` is how the loop ends: a cancellation landing in a Redis command can be
        swallowed (AGENTS.md), so the caller sets the flag as well as cancelling."""
        while not stop.is_set():
            try:
                term = await self.acquire()
            except (RedisError, OSError) as error:
                log.warning("autofix controller lease unavailable", error=describe(error))
                term = None
            if term is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=self.ttl / 3)
                continue
            log.info("autofix controller leads", owner=self.owner, fence=term.fence)
            await self._serve(lead, term, stop)

    async def _serve(self, lead: Lead, term: Term, stop: asyncio.Event) -> None:
        task: asyncio.Task[None] = asyncio.create_task(lead(term), name=f"autofix-leader-{term.fence}")
        stopping = asyncio.ensure_future(stop.wait())
        interval = self.ttl / 3
        valid_until = time.monotonic() + self.ttl
        try:
            while True:
                waited = min(interval, max(0.0, valid_until - time.monotonic()))
                await asyncio.wait({task, stopping}, timeout=waited, return_when=asyncio.FIRST_COMPLETED)
                if task.done() or stopping.done():
                    break
                try:
                    if not await self.renew(term):
                        log.warning("autofix controller lease lost", owner=self.owner, fence=term.fence)
                        break
                    valid_until = time.monotonic() + self.ttl
                except (RedisError, OSError) as error:
                    log.warning("autofix controller lease renewal failed", error=describe(error))
                    # Give up slightly before the TTL so that no standby can already lead.
                    if time.monotonic() >= valid_until - min(interval / 2, 1.0):
                        break
        finally:
            stopping.cancel()
            term.ended.set()
            task.cancel()
            outcome: BaseException | None = (await asyncio.gather(task, return_exceptions=True))[0]
            with contextlib.suppress(RedisError, OSError):
                await self.release(term)
        if isinstance(outcome, Exception):
            raise outcome
