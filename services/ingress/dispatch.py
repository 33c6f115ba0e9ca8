"""Making a delivery's decisions durable, in this order:

0. every inbox message and forwarded event is encoded and its size checked first, so that a
   delivery with one too large for NATS (a 413, which its sender does not retry) writes nothing,
1. the metadata of new threads (so a woken worker finds the thread's kind and reply address),
   with their short-id index entries, in one round trip; and the settings a message sets on
   its thread (its model choice, read by the run it wakes),
2. the inbox appends and the forwarded CI events, concurrently,
3. the wakes, once their thread's inbox append is acknowledged (a wake that overtook its
   message could find an empty inbox and end the run).

Only when every publish is acknowledged is the delivery answered 2xx. A retry after a partial
failure repeats everything: the metadata write is idempotent, JetStream drops the repeated
``Nats-Msg-Id`` of an inbox message or event, and the repeated wake is dropped within the runs
stream's duplicate window (or finds nothing new).
"""

from __future__ import annotations

import asyncio

from redis.exceptions import RedisError

from drydock.bus import Bus, BusUnavailable, MessageTooLarge, Wake
from drydock.errors import describe
from drydock.infra.redis import Batch, BatchConnections
from drydock.threads.inbox import Inbox
from drydock.threads.metadata import ThreadMetadataStore
from drydock.threads.pr_records import PullRequestStore
from services.ingress.errors import Rejected, Unavailable
from services.ingress.routing import Publish, Route


class Dispatcher:
    def __init__(
        self, bus: Bus, metadata: ThreadMetadataStore, records: PullRequestStore, batches: BatchConnections
    ) -> None:
        self._bus = bus
        self._inbox = Inbox(bus)
        self._metadata = metadata
        self._records = records
        self._batches = batches

    async def _create(self, new_threads: list[Route]) -> None:
        batch = Batch(self._batches)
        for route in new_threads:
            self._metadata.queue_create(batch, route.thread_id, kind=route.role, fields=route.create)
            self._records.queue_remember_thread(batch, route.thread_id)
        replies = await batch.execute()
        # Another delivery created a thread since the lookup: its metadata stands, with this message's settings.
        existed = [route for route, created in zip(new_threads, replies[::2], strict=True) if created != 1]
        if existed:
            await asyncio.gather(*(self._settle(route) for route in existed))

    async def _settle(self, route: Route) -> None:
        settings = route.settings
        if settings:
            await self._metadata.update(route.thread_id, lambda _fields: settings)

    # The publishes leave out the bus's timeout: the delivery's one deadline (``Ingress.accept``)
    # bounds them with everything else.
    async def _append_then_wake(self, route: Route, encoded: bytes) -> None:
        await self._inbox.append(route.message, bounded=False, encoded=encoded)
        if route.wake:
            wake = Wake(thread_id=route.thread_id, role=route.role, reason=route.message.trigger or "inbox")
            await self._bus.wake(wake, msg_id=f"wake:{route.thread_id}:{route.message.delivery_id}", bounded=False)

    async def dispatch(self, routes: list[Route], publishes: list[Publish]) -> None:
        """Raises :class:`Unavailable` when Redis or NATS did not take all of it, and
        :class:`Rejected` (413) when a message is larger than NATS accepts."""
        try:
            messages = [self._inbox.encode(route.message) for route in routes]
            events = [self._bus.encode_github(publish.event) for publish in publishes]
            new_threads = [route for route in routes if route.create is not None]
            settled = [route for route in routes if route.create is None and route.settings]
            if new_threads and not settled:
                await self._create(new_threads)
            elif new_threads or settled:
                await asyncio.gather(
                    self._create(new_threads),
                    *(self._settle(route) for route in settled),
                )
            work = [
                *(self._append_then_wake(route, encoded) for route, encoded in zip(routes, messages, strict=True)),
                *(
                    self._bus.github(publish.event, bounded=False, encoded=encoded)
                    for publish, encoded in zip(publishes, events, strict=True)
                ),
            ]
            # Most deliveries have one thing to publish; gathering it would cost a task.
            if len(work) == 1:
                await work[0]
            else:
                await asyncio.gather(*work)
        except MessageTooLarge as error:
            raise Rejected(413, str(error), "too_large", limit_bytes=error.limit) from None
        except BusUnavailable as error:
            raise Unavailable(f"message bus: {error}") from None
        except (RedisError, OSError) as error:
            raise Unavailable(f"store: {describe(error)}") from None
