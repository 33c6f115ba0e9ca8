"""The per-thread lease: at most one worker runs a thread at a time.

A lease lives in Redis with a TTL and is renewed while its run lives. Each acquisition takes
a new fencing token from a per-thread counter that only grows, so a write stamped with an
older token can be recognised and refused after the lease has moved on.

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
from drydock.infra.cancellation import pause
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
        return f"{self.owner}|{self.fence}"


class Leases:
    def __init__(self, redis: Redis, keys: Keys, *, ttl: timedelta) -> None:
        self._redis = redis
        self._keys = keys
        self.ttl = ttl
        self._ttl_ms = str(int(ttl.total_seconds() * 1000))
        self._acquire = redis.register_script(_ACQUIRE)
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)

    async def acquire(self, thread_id: str, owner: str) -> Lease | None:
        """Take the lease if nobody holds it; ``None`` if someone does."""
        if "|" in owner:
            raise ValueError("an owner name cannot contain '|'")
        fence = await self._acquire(
            keys=[self._keys.lease(thread_id), self._keys.lease_fence(thread_id)], args=[owner, self._ttl_ms]
        )
        if not fence:
            return None
        await self._index(thread_id)
        return Lease(thread_id, owner, int(fence))

    async def renew(self, lease: Lease) -> bool:
        """Extend the lease by its TTL; False if it is no longer ours."""
        renewed = bool(await self._renew(keys=[self._keys.lease(lease.thread_id)], args=[lease.token, self._ttl_ms]))
        if renewed:
            await self._index(lease.thread_id)
        return renewed

    async def release(self, lease: Lease) -> bool:
        """Give the lease up; False if it was no longer ours."""
        # Out of the index first: a crash between the two leaves an expiring lease that nobody
        # sweeps, and the unacknowledged wake's redelivery still covers the thread.
        await self._redis.zrem(self._keys.leases_held(), lease.thread_id)
        return bool(await self._release(keys=[self._keys.lease(lease.thread_id)], args=[lease.token]))

    async def _index(self, thread_id: str) -> None:
        # The index is global, so it cannot share the per-thread script's Redis Cluster slot.
        expires_ms = int(time.time() * 1000) + int(self._ttl_ms)
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
        self.lost = False

    async def __aenter__(self) -> Lease:
        lease = await self._leases.acquire(self._thread_id, self._owner)
        if lease is None:
            raise LeaseBusy(f"thread {self._thread_id} is leased by another worker")
        self._lease = lease
        self._task = asyncio.current_task()
        self._renewer = asyncio.create_task(self._keep_renewed(lease), name=f"lease-renewer-{self._thread_id}")
        return lease

    async def _keep_renewed(self, lease: Lease) -> None:
        ttl = self._leases.ttl.total_seconds()
        interval = ttl / 3
        valid_until = time.monotonic() + ttl
        # Give up slightly before the TTL so that no other worker can already hold it.
        margin = min(interval / 2, 1.0)
        while True:
            await pause(min(interval, max(0.0, valid_until - time.monotonic())))
            try:
                # The client retries a lost connection for seconds; a renewal still retrying when
                # the lease runs out must not keep the block running past it.
                bound = max(0.01, valid_until - margin - time.monotonic())
                if not await asyncio.wait_for(self._leases.renew(lease), bound):
                    break
                valid_until = time.monotonic() + ttl
            except (RedisError, OSError) as error:
                log.warning("lease renewal failed", thread_id=lease.thread_id, error=describe(error))
                if time.monotonic() >= valid_until - margin:
                    break
                await asyncio.sleep(min(0.2, interval / 4))
        self.lost = True
        log.warning("lease lost", thread_id=lease.thread_id, fence=lease.fence)
        if self._task is not None:
            self._task.cancel(msg="lease lost")

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        assert self._lease is not None
        assert self._renewer is not None
        self._renewer.cancel()
        # Not ``await self._renewer`` under suppress(CancelledError): that would also swallow a
        # cancellation of this task while it waits.
        await asyncio.wait([self._renewer])
        if self.lost:
            if exc_type is asyncio.CancelledError and self._task is not None and self._task.uncancel() == 0:
                raise LeaseLost(f"lease on thread {self._thread_id} lost") from None
            return False
        with contextlib.suppress(RedisError, OSError):
            await self._leases.release(self._lease)
        return False
