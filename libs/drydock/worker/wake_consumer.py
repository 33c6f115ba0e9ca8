"""Feeds the wakes of one role to a handler, several threads at a time.

One pull subscription bound to the role's durable consumer (provisioned at start-up, never
here) fetches one wake at a time, and only when a run slot is free: fetching more than we run
would let wakes time out in our buffer and be delivered twice. While a handler runs, the wake
is kept alive with in-progress acknowledgements; it is acknowledged when the handler returns.
A handler error naks the wake for a delayed redelivery, bounded by the consumer's
``max_deliver``. A wake that fails its last delivery, or whose every delivery ended without an
answer (JetStream's MAX_DELIVERIES advisory: the worker died each time), is buried as a dead
letter (:mod:`drydock.worker.dead_letters`) instead of vanishing. Cancelling
:meth:`WakeConsumer.run` stops fetching and hands unfinished wakes back at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable

import structlog
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from pydantic import ValidationError

from drydock.bus import Bus, Wake
from drydock.bus.streams import RUNS_STREAM, run_consumer
from drydock.bus.subjects import MAX_DELIVERIES_ADVISORY
from drydock.errors import describe
from drydock.infra.cancellation import pause, raise_if_cancelling
from drydock.roles import Role
from drydock.telemetry.tracing import continued_trace
from drydock.worker.dead_letters import DeadLetterOffice

log = structlog.get_logger(__name__)

WakeHandler = Callable[[Wake], Awaitable[None]]

_MAX_NAK_DELAY = 60.0


UNANSWERED = "every delivery ended without an answer (the worker stopped, crashed or was killed each time)"


class WakeConsumer:
    def __init__(
        self,
        bus: Bus,
        role: Role,
        handler: WakeHandler,
        *,
        dead_letters: DeadLetterOffice,
        concurrency: int,
        heartbeat: float,
        max_deliver: int,
        fetch_timeout: float = 1.0,
        stream: str = RUNS_STREAM,
        durable: str | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._bus = bus
        self._role = role
        self._handler = handler
        self._dead_letters = dead_letters
        self._concurrency = concurrency
        self._heartbeat = heartbeat
        self._max_deliver = max_deliver
        self._fetch_timeout = fetch_timeout
        self._stream = stream
        self._durable = durable or run_consumer(role)
        self.active: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        """Consume until cancelled; on cancellation hand every unfinished wake back."""
        subscription = await self._bus.js.pull_subscribe_bind(durable=self._durable, stream=self._stream)
        # One replica of the role takes each advisory (core NATS, a queue group). The server sends
        # it while serving a pull request, so the worker that pulls is listening: this
        # subscription opens before the first pull and closes after the pull subscription.
        advisories = await self._bus.nc.subscribe(
            f"{MAX_DELIVERIES_ADVISORY}.{self._stream}.{self._durable}",
            queue=f"dead-letters-{self._durable}",
            cb=self._exhausted,
        )
        slots = asyncio.Semaphore(self._concurrency)
        try:
            while True:
                raise_if_cancelling()
                await slots.acquire()
                try:
                    messages = await subscription.fetch(1, timeout=self._fetch_timeout)
                except TimeoutError:
                    slots.release()
                    continue
                except NatsError as error:
                    slots.release()
                    log.warning("fetching wakes failed", role=self._role.value, error=describe(error))
                    await pause(0.5)
                    continue
                for message in messages:
                    task = asyncio.create_task(self._handle(message))
                    self.active.add(task)
                    task.add_done_callback(self._finished(slots))
        finally:
            with contextlib.suppress(NatsError):
                await subscription.unsubscribe()
            if self.active:
                # The server still holds our last pull request until it expires and would hand a
                # wake nak'd before then to that dead request, delaying it by a whole ack wait.
                await asyncio.sleep(self._fetch_timeout)
            for task in self.active:
                task.cancel()
            await asyncio.gather(*self.active, return_exceptions=True)
            with contextlib.suppress(NatsError):
                await advisories.unsubscribe()

    def _finished(self, slots: asyncio.Semaphore) -> Callable[[asyncio.Task[None]], None]:
        def done(task: asyncio.Task[None]) -> None:
            self.active.discard(task)
            slots.release()

        return done

    async def _handle(self, message: Msg) -> None:
        try:
            wake = Wake.model_validate_json(message.data)
        except ValidationError as error:
            log.error("unreadable wake dropped", subject=message.subject, error=describe(error))
            await message.term()
            return
        keepalive = asyncio.create_task(self._keep_alive(message))
        try:
            with continued_trace(
                message.headers, f"wake {wake.role.value}", subject=message.subject, thread_id=wake.thread_id
            ):
                await self._handler(wake)
        except asyncio.CancelledError:
            keepalive.cancel()
            with contextlib.suppress(NatsError):
                await message.nak()
            raise
        except Exception as error:
            keepalive.cancel()
            await self._failed(message, wake, error)
        else:
            keepalive.cancel()
            await message.ack()

    async def _keep_alive(self, message: Msg) -> None:
        while True:
            await pause(self._heartbeat)
            with contextlib.suppress(NatsError):
                await message.in_progress()

    async def _failed(self, message: Msg, wake: Wake, error: Exception) -> None:
        delivered = message.metadata.num_delivered or 1
        log.exception("run failed", thread_id=wake.thread_id, role=wake.role.value, delivery=delivered)
        if delivered < self._max_deliver:
            await message.nak(delay=min(2.0 ** (delivered - 1), _MAX_NAK_DELAY))
            return
        await message.term()
        sequence = message.metadata.sequence.stream if message.metadata.sequence else 0
        await self._dead_letters.bury(
            wake, sequence=sequence, deliveries=delivered, error=f"{type(error).__name__}: {error}"
        )

    async def _exhausted(self, advisory: Msg) -> None:
        """A wake whose deliveries all timed out: bury it and remove it from the work queue."""
        try:
            notice = json.loads(advisory.data)
            sequence, deliveries = int(notice["stream_seq"]), int(notice.get("deliveries") or self._max_deliver)
            stored = await self._bus.js.get_msg(self._stream, sequence)
            wake = Wake.model_validate_json(stored.data or b"")
        except (ValueError, KeyError, TypeError, NatsError, ValidationError) as error:
            log.error("max-deliveries advisory not handled", stream=self._stream, error=repr(error))
            return
        await self._dead_letters.bury(wake, sequence=sequence, deliveries=deliveries, error=UNANSWERED)
        with contextlib.suppress(NatsError):
            await self._bus.js.delete_msg(self._stream, sequence)
