"""A thread's run events from ``DRYDOCK_EVENTS``: the history for the thread page and new events
as they are stored (shared by a thread's viewers, :mod:`.fanout`), each over a NATS ordered
consumer of ``drydock.event.{thread}.*``.

Every event carries its stream sequence, which is its id in the server-sent-events stream: a
viewer that reconnects with ``Last-Event-ID`` continues after the last event it saw. A stream
ends after a while (``event_stream_lifetime``) and the viewer reconnects: a replica shutting down
waits for its open requests, and must not wait for viewers that never leave.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.client import JetStreamContext

from drydock.bus import RunEvent, subjects
from drydock.bus.streams import EVENTS_STREAM

HISTORY_LIMIT = 1000
"""Events a thread page shows at most (the newest)."""


@dataclass(frozen=True)
class StoredEvent:
    seq: int
    """The event's sequence in ``DRYDOCK_EVENTS``."""
    event: RunEvent


class ThreadEvents:
    def __init__(self, js: JetStreamContext) -> None:
        self._js = js

    @contextlib.asynccontextmanager
    async def _consumer(
        self, thread_id: str, after: int, *, new: bool = False
    ) -> AsyncIterator[JetStreamContext.PushSubscription]:
        if new:
            config = ConsumerConfig(deliver_policy=DeliverPolicy.NEW)
        elif after:
            config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=after + 1)
        else:
            config = ConsumerConfig(deliver_policy=DeliverPolicy.ALL)
        subscription = await self._js.subscribe(
            subjects.events_of(thread_id), stream=EVENTS_STREAM, ordered_consumer=True, config=config
        )
        try:
            yield subscription
        finally:
            with contextlib.suppress(Exception):
                await subscription.unsubscribe()

    async def history(self, thread_id: str, *, after: int = 0, limit: int = HISTORY_LIMIT) -> list[StoredEvent]:
        """The thread's events after sequence ``after`` up to now, oldest first (the newest ``limit``)."""
        found: collections.deque[StoredEvent] = collections.deque(maxlen=limit)
        async with self._consumer(thread_id, after) as subscription:
            info = await subscription.consumer_info()
            # What was delivered already plus what is still pending: everything stored now.
            total = (info.delivered.consumer_seq if info.delivered else 0) + (info.num_pending or 0)
            for _ in range(total):
                message = await subscription.next_msg(timeout=5)
                found.append(StoredEvent(message.metadata.sequence.stream, RunEvent.model_validate_json(message.data)))
        return list(found)

    async def live(self, thread_id: str, *, started: asyncio.Event) -> AsyncGenerator[StoredEvent, None]:
        """Each event stored after the consumer exists (``started`` is set then), until cancelled."""
        async with self._consumer(thread_id, 0, new=True) as subscription:
            started.set()
            while True:
                try:
                    message = await subscription.next_msg(timeout=60)
                except NatsTimeout:
                    continue
                yield StoredEvent(message.metadata.sequence.stream, RunEvent.model_validate_json(message.data))

    @contextlib.asynccontextmanager
    async def every_thread(self) -> AsyncIterator[EventFeed]:
        """The events of every thread stored from now on (the consumer exists once entered), for
        the live thread list."""
        subscription = await self._js.subscribe(
            f"{subjects.EVENT}.*.*",
            stream=EVENTS_STREAM,
            ordered_consumer=True,
            config=ConsumerConfig(deliver_policy=DeliverPolicy.NEW),
        )
        try:
            yield EventFeed(subscription)
        finally:
            with contextlib.suppress(Exception):
                await subscription.unsubscribe()


@dataclass(frozen=True)
class EventFeed:
    subscription: JetStreamContext.PushSubscription

    async def next(self, quiet: float) -> StoredEvent | None:
        """The next event, or ``None`` after ``quiet`` seconds without one."""
        try:
            message = await self.subscription.next_msg(timeout=quiet)
        except NatsTimeout:
            return None
        return StoredEvent(message.metadata.sequence.stream, RunEvent.model_validate_json(message.data))
