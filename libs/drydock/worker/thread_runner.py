"""The run loop of DESIGN.md section 3 for one wake.

Take the thread's lease (busy: the holder will see the new messages at its next model call,
so this wake is done); run the thread; while its inbox has messages after the run's cursor,
run again (messages that are only context, :attr:`Trigger.CONTEXT`, wait for the next
wake); release. After releasing, look once more: a message that arrived while the lease
was being released had its wake dropped by a worker that saw the lease still held, so the
last look after the release is what guarantees nothing waits in the inbox unrun.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog

from drydock.bus import Trigger, Wake
from drydock.telemetry.tracing import THREAD_ID, span
from drydock.threads import Inbox, Lease, LeaseBusy, Leases

log = structlog.get_logger(__name__)

RunThread = Callable[[str, Lease], Awaitable[int]]
"""Runs the thread's agent to completion under the lease; returns the inbox cursor after it."""


class ThreadRunner:
    def __init__(self, leases: Leases, inbox: Inbox, run: RunThread, *, owner: str) -> None:
        self._leases = leases
        self._inbox = inbox
        self._run = run
        self._owner = owner

    async def __call__(self, wake: Wake) -> None:
        thread_id = wake.thread_id
        while True:
            try:
                async with self._leases.hold(thread_id, self._owner) as lease:
                    cursor = await self._traced_run(wake, lease)
                    while await self._pending(thread_id, cursor):
                        cursor = await self._traced_run(wake, lease)
            except LeaseBusy:
                log.info("thread is running elsewhere; its holder picks the message up", thread_id=thread_id)
                return
            if not await self._pending(thread_id, cursor):
                return

    async def _traced_run(self, wake: Wake, lease: Lease) -> int:
        with span(f"run {wake.role.value}", attributes={THREAD_ID: wake.thread_id}):
            return await self._run(wake.thread_id, lease)

    async def _pending(self, thread_id: str, cursor: int) -> bool:
        """Whether a message after ``cursor`` asks for a run; context alone waits for the next one."""
        waiting = await self._inbox.read_after(thread_id, cursor)
        return any(stored.message.trigger is not Trigger.CONTEXT for stored in waiting)
