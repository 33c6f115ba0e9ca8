"""The warm pool: ``size`` idle sandboxes started ahead of demand, so that a new thread gets a
running sandbox in the time of a health check instead of a pod start.

:meth:`WarmPool.claim` takes one atomically (see :mod:`.warm_pool_store` for the claim
semantics) and wakes the refill, which runs in the background of every worker replica that
uses the provider. Replicas refill concurrently without overshooting: a start is reserved in
Redis first, and a reservation beyond ``size`` is refused. The refill also cleans up after dead
replicas: reservations whose start never finished and claims never completed are dropped and
their pods deleted (unless the claimed sandbox was already handed to a thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from typing import Protocol

import structlog
from redis.exceptions import RedisError

from drydock.errors import describe
from drydock.sandbox.errors import SandboxError
from drydock.sandbox.handle import SandboxHandle
from drydock.sandbox.providers.kubernetes.naming import new_sandbox_id
from drydock.sandbox.providers.kubernetes.warm_pool_store import WarmPoolStore

log = structlog.get_logger(__name__)


class PoolPods(Protocol):
    """What the pool needs from the provider."""

    async def start_idle(self, sandbox_id: str) -> SandboxHandle:
        """Start a sandbox for no thread yet and wait until its daemon answers."""
        ...

    async def remove(self, sandbox_id: str) -> None:
        """Delete the sandbox's pod if it exists."""
        ...

    async def recorded(self, sandbox_id: str) -> bool:
        """Whether the sandbox has been handed to a thread (has its record)."""
        ...

    def seal(self, handle: SandboxHandle) -> dict[str, str]:
        """The handle as stored in the pool (:meth:`~drydock.sandbox.records.SandboxStore.seal`)."""
        ...

    def unseal(self, record: Mapping[str, str]) -> SandboxHandle | None:
        """A stored handle back; ``None`` when it fails its MAC."""
        ...


class WarmPool:
    """Keeps ``size`` sandboxes ready; see the module documentation."""

    def __init__(
        self,
        store: WarmPoolStore,
        pods: PoolPods,
        *,
        size: int,
        refill_interval: float,
        start_bound: float,
        claim_timeout: float,
    ) -> None:
        if size < 1:
            raise ValueError("a warm pool needs a size of at least 1")
        self.store = store
        self._pods = pods
        self.size = size
        self._interval = refill_interval
        self._start_bound = start_bound
        self._claim_timeout = claim_timeout
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def start(self) -> None:
        """Start refilling in the background (idempotent; never again after :meth:`aclose`)."""
        if self._closed:
            return
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._refill_forever(), name="warm-pool-refill")

    def wake(self) -> None:
        self._wake.set()

    async def aclose(self) -> None:
        """Stop refilling; the idle sandboxes stay for the next process."""
        # The flag and the wake, not only the cancellation: redis-py's asyncio client can swallow
        # a cancellation that arrives during a command, and the loop must end all the same.
        self._closed = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def claim(self) -> SandboxHandle | None:
        """Take an idle sandbox out of the pool (its handle has no thread yet); ``None`` when the
        pool is empty. The caller must :meth:`complete` or :meth:`discard` it."""
        found = await self.store.claim(now=time.time())
        self.wake()
        if found is None:
            return None
        handle = self._pods.unseal(found[1])
        if handle is None or handle.id != found[0]:
            await self.discard(found[0])
            return None
        return handle

    async def complete(self, sandbox_id: str) -> None:
        await self.store.complete(sandbox_id)

    async def discard(self, sandbox_id: str) -> None:
        """Delete a claimed sandbox that turned out unusable."""
        await self._pods.remove(sandbox_id)
        await self.store.complete(sandbox_id)

    async def refill(self) -> int:
        """One round: clean up, trim to ``size``, start what is missing. The number started."""
        now = time.time()
        for sandbox_id, raw in await self.store.stale_starts(before=now - self._start_bound):
            if await self.store.drop_start(sandbox_id, raw):
                log.warning("dropped a warm-pool start that never finished", sandbox_id=sandbox_id)
                await self._pods.remove(sandbox_id)
        for sandbox_id, at in await self.store.stale_claims(before=now - self._claim_timeout):
            if await self.store.drop_claim(sandbox_id, at) and not await self._pods.recorded(sandbox_id):
                log.warning("dropped a warm-pool claim that was never completed", sandbox_id=sandbox_id)
                await self._pods.remove(sandbox_id)
        while (excess := await self.store.shrink(self.size)) is not None:
            await self._pods.remove(excess)
        reserved: list[str] = []
        while len(reserved) < self.size:
            sandbox_id = new_sandbox_id()
            if not await self.store.reserve(sandbox_id, size=self.size, now=time.time()):
                break
            reserved.append(sandbox_id)
        started = await asyncio.gather(*(self._start(sandbox_id) for sandbox_id in reserved))
        return sum(started)

    async def _start(self, sandbox_id: str) -> bool:
        try:
            handle = await self._pods.start_idle(sandbox_id)
        except SandboxError as error:
            await self.store.release(sandbox_id)
            log.warning("a warm-pool sandbox could not be started", sandbox_id=sandbox_id, error=describe(error))
            return False
        if not await self.store.ready(sandbox_id, self._pods.seal(handle), now=time.time()):
            log.info("warm-pool reservation was dropped while starting; deleting", sandbox_id=sandbox_id)
            await self._pods.remove(sandbox_id)
            return False
        return True

    async def _refill_forever(self) -> None:
        while not self._closed:
            self._wake.clear()
            try:
                started = await self.refill()
                if started:
                    log.info("warm pool refilled", started=started, size=self.size)
            except (SandboxError, RedisError, OSError) as error:
                log.warning("warm-pool refill failed", error=describe(error))
            # Not asyncio.wait_for: on Python 3.11 it can swallow a cancellation that arrives as
            # the wake is set, and aclose() would wait forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._interval):
                    await self._wake.wait()
