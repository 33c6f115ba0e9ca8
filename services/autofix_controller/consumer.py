"""Feeds one durable pull consumer (provisioned at start-up, never here) to a handler, up to
``concurrency`` messages at a time, fetching only as many as there are free slots: a fetched
message waits in no buffer where its ack wait could run out. The first message of each fetch
is awaited alone and the rest taken only if already queued (:func:`_queued`).

A message is acknowledged when its handler returns, so whatever the handler published (its
decision event, a repair request) was acknowledged by JetStream first. A handler error naks it
for a delayed redelivery, bounded by the consumer's ``max_deliver``, after which it is
terminated and logged; :class:`Drop` acknowledges a message that no retry can help.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from nats.aio.msg import Msg
from nats.errors import Error as NatsError

from drydock.errors import describe
from drydock.telemetry.tracing import continued_trace

log = structlog.get_logger(__name__)

Handler = Callable[[Msg], Awaitable[None]]
_MAX_NAK_DELAY = 30.0
_DRAIN_TIMEOUT = 0.001


class Drop(Exception):
    """Raised by a handler: the message cannot be handled, now or ever (logged, then acknowledged)."""


async def _queued(subscription: Any, most: int) -> list[Msg]:
    """Up to ``most`` messages the server holds right now. nats-py's ``fetch`` of more than one
    waits until the batch is full or its timeout passes once it has a message, so a trickle of
    events would wait in the batch: the first message is awaited alone (and its handler started),
    the rest taken if queued, waiting at most ``_DRAIN_TIMEOUT`` for them."""
    try:
        found: list[Msg] = await subscription.fetch(most, timeout=_DRAIN_TIMEOUT)
    except TimeoutError:
        return []
    return found


class StreamConsumer:
    def __init__(
        self,
        js: object,
        *,
        stream: str,
        durable: str,
        handler: Handler,
        concurrency: int,
        max_deliver: int,
        batch: int = 256,
        fetch_timeout: float = 1.0,
    ) -> None:
        self._js = js
        self._stream = stream
        self._durable = durable
        self._handler = handler
        self._concurrency = concurrency
        self._max_deliver = max_deliver
        self._batch = batch
        self._fetch_timeout = fetch_timeout
        self.active: set[asyncio.Task[None]] = set()

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until ``stop`` is set or the task is cancelled; messages still being handled
        then are handed back (nak) for the next leader."""
        subscription = await self._js.pull_subscribe_bind(durable=self._durable, stream=self._stream)  # type: ignore[attr-defined]
        try:
            while not stop.is_set():
                free = self._concurrency - len(self.active)
                if free <= 0:
                    await asyncio.wait(self.active, return_when=asyncio.FIRST_COMPLETED)
                    continue
                try:
                    self._start(await subscription.fetch(1, timeout=self._fetch_timeout))
                    if free > 1:
                        self._start(await _queued(subscription, min(free - 1, self._batch)))
                except TimeoutError:
                    continue
                except NatsError as error:
                    log.warning("fetching failed", consumer=self._durable, error=describe(error))
                    await asyncio.sleep(0.5)
                    continue
        finally:
            with contextlib.suppress(NatsError):
                await subscription.unsubscribe()
            for task in list(self.active):
                task.cancel()
            await asyncio.gather(*self.active, return_exceptions=True)

    def _start(self, messages: list[Msg]) -> None:
        for message in messages:
            task = asyncio.create_task(self._handle(message))
            self.active.add(task)
            task.add_done_callback(self.active.discard)

    async def _handle(self, message: Msg) -> None:
        try:
            with continued_trace(message.headers, f"consume {self._durable}", subject=message.subject):
                await self._handler(message)
        except asyncio.CancelledError:
            with contextlib.suppress(NatsError):
                await message.nak()
            raise
        except Drop as dropped:
            log.error("message dropped", consumer=self._durable, subject=message.subject, reason=str(dropped))
            await message.ack()
        except Exception as error:
            await self._failed(message, error)
        else:
            await message.ack()

    async def _failed(self, message: Msg, error: Exception) -> None:
        delivered = message.metadata.num_delivered or 1
        if delivered < self._max_deliver:
            log.warning(
                "handling failed; redelivered later", consumer=self._durable, subject=message.subject,
                delivery=delivered, error=repr(error),
            )  # fmt: skip
            await message.nak(delay=min(2.0 ** (delivered - 1), _MAX_NAK_DELAY))
            return
        log.error(
            "handling failed for good", consumer=self._durable, subject=message.subject, delivery=delivered,
            error=repr(error),
        )  # fmt: skip
        await message.term()
