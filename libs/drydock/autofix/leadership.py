"""One active autofix controller at a time: a Redis lease with a TTL and a fencing counter;
the other replicas stand by and take over once the lease expires.

It is the fenced lease of :mod:`drydock.infra.lease` (as the per-thread lease is) on the
controller's own key (``Keys.autofix_leader``). The leader renews every third of the TTL; when
renewal fails or Redis stays silent until the lease would expire, its term ends:
the term's ``ended`` event is set (loops that talk to Redis check it, AGENTS.md) and its task
is cancelled. Every term has a new fence, recorded on autofix's events. A deposed leader can
finish at most the decision it was making, and that is safe: opening a repair is one atomic
script and repeated dispatches carry the same message ids.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import structlog
from redis.asyncio import Redis
from redis.exceptions import RedisError

from drydock.errors import describe
from drydock.infra.lease import FencedLeases, check_owner, keep_renewed, token
from drydock.infra.redis import Keys

log = structlog.get_logger(__name__)


@dataclass
class Term:
    """One leader's term: its fence, and ``ended`` once it lost or gave up the lease."""

    owner: str
    fence: int
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def token(self) -> str:
        return token(self.owner, self.fence)


Lead = Callable[[Term], Coroutine[Any, Any, None]]


class Leadership:
    def __init__(self, redis: Redis, keys: Keys, *, owner: str, ttl: timedelta) -> None:
        check_owner(owner)
        self._keys = keys
        self.owner = owner
        self.ttl = ttl.total_seconds()
        self._leases = FencedLeases(redis, ttl=ttl)

    async def acquire(self) -> Term | None:
        """Become the leader if nobody is; ``None`` if somebody is."""
        fence = await self._leases.acquire(self._keys.autofix_leader(), self._keys.autofix_leader_fence(), self.owner)
        return Term(self.owner, fence) if fence is not None else None

    async def renew(self, term: Term) -> bool:
        return await self._leases.renew(self._keys.autofix_leader(), term.token)

    async def release(self, term: Term) -> bool:
        return await self._leases.release(self._keys.autofix_leader(), term.token)

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
        renewing = asyncio.create_task(
            keep_renewed(
                lambda: self.renew(term),
                self._leases.ttl,
                log.bind(lease=self._keys.autofix_leader(), owner=self.owner, fence=term.fence),
            ),
            name=f"autofix-leader-renewer-{term.fence}",
        )
        try:
            await asyncio.wait({task, stopping, renewing}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            renewing.cancel()
            term.ended.set()
            task.cancel()
            outcome: BaseException | None = (await asyncio.gather(task, return_exceptions=True))[0]
            await asyncio.wait([renewing])
            with contextlib.suppress(RedisError, OSError):
                await self.release(term)
        if isinstance(outcome, Exception):
            raise outcome
        if not renewing.cancelled() and (failure := renewing.exception()) is not None:
            raise failure
