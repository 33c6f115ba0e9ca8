"""Live events for many viewers of one thread: one NATS ordered consumer per followed thread in
this process, shared by all its viewers, instead of one per viewer.

A viewer joins the thread's channel first (its queue starts filling), waits for the channel's
consumer to exist, then reads the history after its ``Last-Event-ID`` from the stream, and then
takes the live events from its queue, skipping what the history already gave it (by sequence).
Everything stored before the shared consumer existed is in the history; everything after reaches
the queue; the sequence removes the overlap. The channel ends with its last viewer. A viewer that
falls far behind is dropped (its stream ends and the browser reconnects where it left off), so one
slow connection costs no memory. Only an optimization: the truth is the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field

import structlog

from services.dashboard.threads.events import StoredEvent, ThreadEvents

log = structlog.get_logger(__name__)

QUEUE_LIMIT = 1000
"""Events a viewer may lag behind before it is dropped."""
_CLOSED = object()


@dataclass(eq=False)
class _Channel:
    thread_id: str
    viewers: set[asyncio.Queue[object]] = field(default_factory=set)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class EventFanout:
    def __init__(self, events: ThreadEvents) -> None:
        self._events = events
        self._channels: dict[str, _Channel] = {}

    @property
    def followed(self) -> int:
        """Threads with a shared consumer in this process now."""
        return len(self._channels)

    async def _pump(self, channel: _Channel) -> None:
        try:
            async for stored in self._events.live(channel.thread_id, started=channel.ready):
                for queue in list(channel.viewers):
                    try:
                        queue.put_nowait(stored)
                    except asyncio.QueueFull:
                        channel.viewers.discard(queue)
                        _close(queue)
        except Exception as error:
            log.warning("live events of a thread stopped", thread_id=channel.thread_id, error=repr(error))
        finally:
            channel.ready.set()
            for queue in list(channel.viewers):
                _close(queue)

    @contextlib.asynccontextmanager
    async def _joined(self, thread_id: str) -> AsyncIterator[tuple[_Channel, asyncio.Queue[object]]]:
        channel = self._channels.get(thread_id)
        if channel is None or channel.task is None or channel.task.done():
            channel = self._channels[thread_id] = _Channel(thread_id)
            channel.task = asyncio.create_task(self._pump(channel), name=f"events-{thread_id}")
        queue: asyncio.Queue[object] = asyncio.Queue(QUEUE_LIMIT)
        channel.viewers.add(queue)
        try:
            yield channel, queue
        finally:
            channel.viewers.discard(queue)
            if not channel.viewers and self._channels.get(thread_id) is channel:
                del self._channels[thread_id]
                if channel.task is not None:
                    channel.task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await channel.task

    async def follow(
        self, thread_id: str, *, after: int = 0, heartbeat: float = 15.0, lifetime: float | None = None
    ) -> AsyncGenerator[StoredEvent | None, None]:
        """Like :meth:`ThreadEvents.follow`, from the shared consumer: the events after ``after``,
        ``None`` for a keep-alive after ``heartbeat`` quiet seconds, ending after ``lifetime``."""
        deadline = None if lifetime is None else time.monotonic() + lifetime
        async with self._joined(thread_id) as (channel, queue):
            await channel.ready.wait()
            last = after
            for stored in await self._events.history(thread_id, after=after):
                last = stored.seq
                yield stored
            while True:
                wait = heartbeat if deadline is None else min(heartbeat, deadline - time.monotonic())
                if wait <= 0:
                    return
                try:
                    item = await asyncio.wait_for(queue.get(), wait)
                except TimeoutError:
                    yield None
                    continue
                if item is _CLOSED:
                    return
                assert isinstance(item, StoredEvent)
                if item.seq > last:
                    last = item.seq
                    yield item


def _close(queue: asyncio.Queue[object]) -> None:
    """Tell a viewer its stream ends, making room for the marker in a full queue."""
    if queue.full():
        with contextlib.suppress(asyncio.QueueEmpty):
            queue.get_nowait()
    queue.put_nowait(_CLOSED)
