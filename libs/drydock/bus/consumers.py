"""Durable pull consumers on FastStream's NATS JetStream pull subscriber.

A :class:`DurableConsumer` binds to a durable consumer provisioned at start-up (never here) and
feeds its messages, parsed as the subscription's envelope, to a handler, up to ``concurrency``
at a time. Each message is settled by hand, after its handler (``AckPolicy.MANUAL``):

- acknowledged when the handler returns, or raises :class:`Drop` (no retry can help);
- kept alive with in-progress acknowledgements while the handler runs, when ``heartbeat`` is
  set (a run takes minutes, the ack wait is shorter);
- nak'd for a redelivery delayed 1, 2, 4… seconds when the handler raises, up to the
  consumer's ``max_deliver``; at the last delivery terminated and handed to ``on_last_failure``
  (the wake consumer buries it as a dead letter);
- handed back (nak'd) when the consumer stops in the middle of it;
- terminated (or acknowledged, with ``drop_unreadable``) when it is not the envelope at all.

Concurrency is a bounded set of tasks fed by one pull subscriber, which fetches one message at a
time and asks for the next only once a place is free, so no fetched message waits in memory.
FastStream's own ``max_workers`` is not used: ``ConcurrentPullStreamSubscriber`` puts fetched
messages into an in-memory queue of ``max_workers`` places
(``faststream/_internal/endpoint/subscriber/mixins.py``, ``ConcurrentMixin._put_msg``) where no
heartbeat reaches them, so a wake waiting there behind minutes-long runs outlives its ack wait
and is delivered twice. A plain subscriber with a batch of N waits for the slowest of the N
before it fetches again (``faststream/nats/subscriber/usecases/stream_pull_subscriber.py``,
``_consume_pull``). One subscriber per place, as before, kept every idle place's pull request
going round: an idle worker of 300 places spent a tenth of a core asking the server for nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Generic

import anyio
import structlog
from faststream import BaseMiddleware, StreamMessage
from faststream.middlewares import AckPolicy
from faststream.nats import JStream, NatsBroker, NatsRouter, PullSub
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from pydantic import BaseModel, ValidationError

from drydock.bus.streams import Envelope, Subscription
from drydock.bus.subjects import MAX_DELIVERIES_ADVISORY
from drydock.errors import describe
from drydock.infra.cancellation import pause, raise_if_cancelling
from drydock.telemetry.logging import BUS_LOGGER
from drydock.telemetry.tracing import continued_trace

log = structlog.get_logger(__name__)

LastFailure = Callable[[Any, Msg, Exception], Awaitable[None]]
"""Called with the envelope, the raw message and the error once its last delivery failed."""


class MaxDeliveriesAdvisory(BaseModel):
    """The part of JetStream's ``io.nats.jetstream.advisory.v1.max_deliver`` advisory we read."""

    stream: str
    consumer: str
    stream_seq: int
    deliveries: int | None = None


def advisory_router(
    stream: str, durable: str, handler: Callable[[MaxDeliveriesAdvisory], Awaitable[None]]
) -> NatsRouter:
    """A subscriber of JetStream's advisory that a message of ``durable`` used up its deliveries
    unanswered. One replica takes each (a queue group); the server sends it while serving a pull
    request, so the replica that pulls is listening."""
    router = NatsRouter()
    router.subscriber(
        f"{MAX_DELIVERIES_ADVISORY}.{stream}.{durable}",
        queue=f"dead-letters-{durable}",
        ack_policy=AckPolicy.MANUAL,
        title=f"{durable}-max-deliveries",
        description=f"JetStream's advisory that a message of '{durable}' used up its deliveries unanswered: "
        "it is buried as a dead letter and removed from the stream.",
    )(handler)
    return router


class Drop(Exception):
    """Raised by a handler: the message cannot be handled, now or ever (logged, then acknowledged)."""


class SharedConnectionBroker(NatsBroker):
    """A FastStream broker on a NATS connection made elsewhere (:func:`drydock.bus.connect_nats`):
    the service's own user, credentials and permissions. Stopping it leaves the connection open."""

    def __init__(self, nc: NatsClient | None = None, **options: Any) -> None:
        options.setdefault("logger", logging.getLogger(BUS_LOGGER))
        options.setdefault("log_level", logging.DEBUG)
        # Stopping hands unfinished messages back at once instead of waiting for their handlers.
        options.setdefault("graceful_timeout", None)
        super().__init__(**options)
        self._shared = nc

    async def _connect(self) -> NatsClient:
        if self._shared is None:
            return await super()._connect()
        self.config.connect(self._shared)
        return self._shared

    async def stop(self, *args: Any, **kwargs: Any) -> None:
        if self._shared is None:
            await super().stop(*args, **kwargs)
            return
        self._connection = None  # NatsBroker.stop would drain the connection we share
        await super().stop(*args, **kwargs)


def reply_prefix(nc: NatsClient) -> bytes:
    """Where a pull subscription's messages arrive: under the connection's inbox prefix, the only
    one its user may subscribe to (``drydock.bus.permissions``)."""
    return nc.new_inbox().rsplit(".", 1)[0].encode() + b"."


async def serve(nc: NatsClient, *parts: NatsRouter | DurableConsumer[Any], stop: asyncio.Event | None = None) -> None:
    """Run ``parts`` (routers, and consumers' routers) on ``nc`` until ``stop`` is set or the
    task is cancelled; messages still being handled then are handed back."""
    broker = SharedConnectionBroker(nc)
    consumers = [part for part in parts if isinstance(part, DurableConsumer)]
    for part in parts:
        broker.include_router(part.router(nc) if isinstance(part, DurableConsumer) else part)
    try:
        await broker.start()
        # nats-py turns a cancellation during its requests into its own timeout, which
        # FastStream's start swallows: a cancellation must not be lost with it.
        raise_if_cancelling()
        await (stop or asyncio.Event()).wait()
    finally:
        # In a task of its own, which no cancellation of ours interrupts: the stop hands
        # unfinished messages back and must run to its end.
        stopping = asyncio.create_task(_stop(broker, consumers))
        await asyncio.wait({stopping})
        stopping.result()


async def _stop(broker: SharedConnectionBroker, consumers: list[DurableConsumer[Any]]) -> None:
    # The subscribers first: nothing is fetched while the messages in hand are handed back.
    await broker.stop()
    await asyncio.gather(*(consumer.hand_back() for consumer in consumers))


class DurableConsumer(Generic[Envelope]):
    def __init__(
        self,
        subscription: Subscription[Envelope],
        handler: Callable[[Envelope], Awaitable[None]],
        *,
        concurrency: int,
        max_deliver: int,
        heartbeat: float | None = None,
        fetch_timeout: float = 1.0,
        max_nak_delay: float = 60.0,
        on_last_failure: LastFailure | None = None,
        drop_unreadable: bool = False,
        stream: str | None = None,
        durable: str | None = None,
    ) -> None:
        """``stream`` and ``durable`` bind to another consumer of the same shape (tests)."""
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.subscription = subscription
        self._handler = handler
        self._max_deliver = max_deliver
        self._heartbeat = heartbeat
        self._fetch_timeout = fetch_timeout
        self._max_nak_delay = max_nak_delay
        self._on_last_failure = on_last_failure
        self._drop_unreadable = drop_unreadable
        self._stream = stream or subscription.stream
        self._durable = durable or subscription.durable
        self._places = asyncio.Semaphore(concurrency)
        self._in_hand: set[asyncio.Task[None]] = set()

    def router(self, nc: NatsClient | None = None) -> NatsRouter:
        """The consumer's subscriber; ``nc`` (the connection it will run on) gives its inbox prefix.
        Served by :func:`serve` with the consumer itself, which hands its messages back on stop."""
        router = NatsRouter(middlewares=[partial(_Settle, consumer=self)])
        router.subscriber(
            self.subscription.subject,
            stream=JStream(self._stream, declare=False),
            durable=self._durable,
            pull_sub=PullSub(batch_size=1, timeout=self._fetch_timeout),
            inbox_prefix=reply_prefix(nc) if nc is not None else b"_INBOX.",
            ack_policy=AckPolicy.MANUAL,
            title=f"{self.subscription.durable}",
            description=f"{self.subscription.description} Stream {self.subscription.stream}, "
            f"durable pull consumer '{self.subscription.durable}'.",
        )(self._typed_handler())
        return router

    async def run(self, nc: NatsClient, stop: asyncio.Event | None = None) -> None:
        """Consume until ``stop`` is set or the task is cancelled; unfinished messages are handed back."""
        await serve(nc, self, stop=stop)

    async def take(self, message: StreamMessage[Any]) -> None:
        """Settle ``message`` in a task of its own; return once a place is free for the next
        (the subscriber fetches it only then)."""
        # Free: the previous call returned only once a place was.
        await self._places.acquire()
        task = asyncio.create_task(self.settle(message.raw_message, message.body))
        self._in_hand.add(task)
        task.add_done_callback(self._settled)
        async with self._places:
            pass

    def _settled(self, task: asyncio.Task[None]) -> None:
        self._in_hand.discard(task)
        self._places.release()
        error = None if task.cancelled() else task.exception()
        if error is not None:
            log.error("message not settled", consumer=self._durable, error=describe(error))

    async def hand_back(self) -> None:
        """Hand back every message still being handled (its handler is cancelled)."""
        in_hand = list(self._in_hand)
        for task in in_hand:
            task.cancel()
        await asyncio.gather(*in_hand, return_exceptions=True)

    def _typed_handler(self) -> Callable[..., Awaitable[None]]:
        handler = self._handler

        async def handle(envelope: Any) -> None:
            await handler(envelope)

        # For FastStream's schema of the subscriber; messages reach the handler through :meth:`take`.
        handle.__annotations__ = {"envelope": self.subscription.envelope, "return": None}
        handle.__doc__ = self.subscription.description
        return handle

    async def settle(self, raw: Msg, body: bytes) -> None:
        """Handle one message, then acknowledge, retry or hand it back."""
        try:
            envelope = self.subscription.envelope.model_validate_json(body)
        except ValidationError as error:
            log.error("unreadable message dropped", consumer=self._durable, subject=raw.subject, error=describe(error))
            await (raw.ack() if self._drop_unreadable else raw.term())
            return
        keepalive = asyncio.create_task(self._keep_alive(raw)) if self._heartbeat else None
        try:
            with continued_trace(
                raw.headers,
                self.subscription.span_name,
                subject=raw.subject,
                thread_id=getattr(envelope, "thread_id", None),
            ):
                await self._handler(envelope)
        except asyncio.CancelledError:
            if keepalive is not None:
                keepalive.cancel()
            # The consumer stops (:meth:`hand_back`): hand the message back, shielded.
            with anyio.CancelScope(shield=True), contextlib.suppress(NatsError):
                # After the pull requests of our stopped subscribers expired: the server could
                # hand it to one of them, and it would wait there a whole ack wait.
                await raw.nak(delay=self._fetch_timeout)
            log.info("message handed back", consumer=self._durable, subject=raw.subject)
        except Exception as error:
            if keepalive is not None:
                keepalive.cancel()
            await self._failed(raw, envelope, error)
        else:
            if keepalive is not None:
                keepalive.cancel()
            await raw.ack()

    async def _keep_alive(self, raw: Msg) -> None:
        assert self._heartbeat is not None
        while True:
            await pause(self._heartbeat)
            with contextlib.suppress(NatsError):
                await raw.in_progress()

    async def _failed(self, raw: Msg, envelope: Envelope, error: Exception) -> None:
        if isinstance(error, Drop):
            log.error("message dropped", consumer=self._durable, subject=raw.subject, reason=str(error))
            await raw.ack()
            return
        delivered = raw.metadata.num_delivered or 1
        if delivered < self._max_deliver:
            log.warning(
                "handling failed; redelivered later", consumer=self._durable, subject=raw.subject,
                delivery=delivered, error=describe(error), exc_info=error,
            )  # fmt: skip
            await raw.nak(delay=min(2.0 ** (delivered - 1), self._max_nak_delay))
            return
        log.error(
            "handling failed for good", consumer=self._durable, subject=raw.subject, delivery=delivered,
            error=describe(error), exc_info=error,
        )  # fmt: skip
        await raw.term()
        if self._on_last_failure is not None:
            await self._on_last_failure(envelope, raw, error)


class _Settle(BaseMiddleware):
    """Hands each message of a :class:`DurableConsumer` to it (:meth:`DurableConsumer.take`)."""

    def __init__(self, msg: Any, /, *, context: Any, consumer: DurableConsumer[Any]) -> None:
        super().__init__(msg, context=context)
        self._consumer = consumer

    async def consume_scope(self, call_next: Any, msg: StreamMessage[Any]) -> Any:
        await self._consumer.take(msg)
