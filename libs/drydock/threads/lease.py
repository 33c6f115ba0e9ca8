"""The per-thread lease: at most one worker runs a thread at a time.

A lease is the fenced lease of :mod:`drydock.infra.lease` on the thread's key, renewed while its
run lives; its fence lets a write stamped by an older holder be refused.

Held leases are also indexed by expiry (:meth:`Keys.leases_held`): a lease that expires without
being released belongs to a holder that died mid-run, and the sweeper
(:mod:`drydock.worker.lease_sweeper`) wakes its thread then, whatever the wake's ack wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from datetime import timedelta
from types import TracebackType

import structlog
from redis.asyncio import Redis
from redis.exceptions import RedisError

from drydock.errors import describe
from drydock.infra.lease import FencedLeases, keep_renewed, token
from drydock.infra.redis import Keys

log = structlog.get_logger(__name__)

RECANCEL_EVERY = 0.05
"""How often a block whose lease was lost is cancelled again while it has not ended."""


class LeaseBusy(RuntimeError):
    """Another worker holds the thread's lease."""


class LeaseLost(RuntimeError):
    """The lease expired or was taken over while its holder was still running."""


@dataclass(frozen=True)
class Lease:
    thread_id: str
    owner: str
    fence: int

    @property
    def token(self) -> str:
        return token(self.owner, self.fence)


class Leases:
    def __init__(self, redis: Redis, keys: Keys, *, ttl: timedelta) -> None:
        self._redis = redis
        self._keys = keys
        self.ttl = ttl
        self._leases = FencedLeases(redis, ttl=ttl)

    async def acquire(self, thread_id: str, owner: str) -> Lease | None:
        """Take the lease if nobody holds it and index it; ``None`` if someone holds it."""
        lease = await self.take(thread_id, owner)
        if lease is not None:
            await self.index(lease)
        return lease

    async def take(self, thread_id: str, owner: str) -> Lease | None:
        """Take the lease if nobody holds it, not yet indexed (:meth:`index`); ``None`` if someone does."""
        fence = await self._leases.acquire(self._keys.lease(thread_id), self._keys.lease_fence(thread_id), owner)
        return Lease(thread_id, owner, fence) if fence is not None else None

    async def index(self, lease: Lease) -> None:
        """Index the lease by its expiry, for the sweeper."""
        await self._index(lease.thread_id)

    async def renew(self, lease: Lease) -> bool:
        """Extend the lease by its TTL; False if it is no longer ours."""
        renewed = await self._leases.renew(self._keys.lease(lease.thread_id), lease.token)
        if renewed:
            await self._index(lease.thread_id)
        return renewed

    async def release(self, lease: Lease) -> bool:
        """Give the lease up; False if it was no longer ours."""
        # Out of the index first: a crash between the two leaves an expiring lease that nobody
        # sweeps, and the unacknowledged wake's redelivery still covers the thread.
        await self._redis.zrem(self._keys.leases_held(), lease.thread_id)
        return await self._leases.release(self._keys.lease(lease.thread_id), lease.token)

    async def _index(self, thread_id: str) -> None:
        # The index is global, so it cannot share the per-thread script's Redis Cluster slot.
        expires_ms = int(time.time() * 1000) + self._leases.ttl_ms
        await self._redis.zadd(self._keys.leases_held(), {thread_id: expires_ms})

    def hold(self, thread_id: str, owner: str) -> HeldLease:
        """Hold the lease for the enclosed block; see :class:`HeldLease`."""
        return HeldLease(self, thread_id, owner)


class HeldLease:
    """``async with leases.hold(thread, owner) as lease:`` runs the block under the lease.

    Raises :class:`LeaseBusy` on entry if another worker holds it. While the block runs the
    lease is renewed every third of its TTL. If renewal says the lease is gone, or Redis does
    not answer until the lease would have expired, the task running the block is cancelled at
    once and the block ends with :class:`LeaseLost`. On exit the lease is released.
    """

    def __init__(self, leases: Leases, thread_id: str, owner: str) -> None:
        self._leases = leases
        self._thread_id = thread_id
        self._owner = owner
        self._lease: Lease | None = None
        self._task: asyncio.Task[object] | None = None
        self._renewer: asyncio.Task[None] | None = None
        self._indexed: asyncio.Future[None] | None = None
        self.lost = False
        self._cancels = 0

    async def __aenter__(self) -> Lease:
        lease = await self._leases.take(self._thread_id, self._owner)
        if lease is None:
            raise LeaseBusy(f"thread {self._thread_id} is leased by another worker")
        self._task = asyncio.current_task()
        if self._task is not None and self._task.cancelling():
            # The cancellation met Redis's answer and a library swallowed it (Python 3.11's
            # timeouts do): the caller asked to stop, so the lease just taken is given back.
            with contextlib.suppress(RedisError, OSError):
                await self._leases.release(lease)
            raise asyncio.CancelledError
        self._lease = lease
        # The block need not wait for the index: only the sweeper reads it, and a holder that
        # dies before it is written is still covered by its wake's redelivery.
        self._indexed = asyncio.ensure_future(self._leases.index(lease))
        # Read by a callback, not by the exit: an exit cancelled while it waits never reads it.
        self._indexed.add_done_callback(self._log_unindexed)
        self._renewer = asyncio.create_task(self._keep_renewed(lease), name=f"lease-renewer-{self._thread_id}")
        return lease

    async def _keep_renewed(self, lease: Lease) -> None:
        await keep_renewed(
            lambda: self._leases.renew(lease), self._leases.ttl, log.bind(thread_id=lease.thread_id, fence=lease.fence)
        )
        self.lost = True
        # A library can swallow the cancellation (Python 3.11's wait_for does when it meets an
        # answer), so it is repeated until the block ends: the run must not act on unleased.
        while self._task is not None and not self._task.done():
            self._task.cancel(msg="lease lost")
            self._cancels += 1
            try:
                await asyncio.sleep(RECANCEL_EVERY)
            except asyncio.CancelledError:
                return

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        assert self._lease is not None
        assert self._renewer is not None
        assert self._indexed is not None
        self._renewer.cancel()
        # Not ``await self._renewer`` under suppress(CancelledError): that would also swallow a
        # cancellation of this task while it waits. The index is written before the release
        # takes it out, or it would outlive the lease and the sweeper would wake the thread.
        await asyncio.wait([self._renewer, self._indexed])
        if self.lost:
            if exc_type is None or (exc_type is asyncio.CancelledError and self._ours_only()):
                raise LeaseLost(f"lease on thread {self._thread_id} lost") from None
            return False
        with contextlib.suppress(RedisError, OSError):
            await self._leases.release(self._lease)
        return False

    def _log_unindexed(self, indexed: asyncio.Future[None]) -> None:
        if not indexed.cancelled() and (error := indexed.exception()) is not None:
            log.warning("held lease not indexed", thread_id=self._thread_id, error=describe(error))

    def _ours_only(self) -> bool:
        """Whether every cancellation the task got was this lease's: then it ends as :class:`LeaseLost`."""
        assert self._task is not None
        remaining = self._task.cancelling()
        for _ in range(self._cancels):
            remaining = self._task.uncancel()
        return remaining == 0
