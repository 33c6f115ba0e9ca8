"""Feeds the wakes of one role to a handler, several threads at a time.

The role's durable consumer (provisioned at start-up, never here) is read by a
:class:`~drydock.bus.consumers.DurableConsumer` (FastStream's JetStream pull subscriber): one
wake fetched per free run slot, kept alive with in-progress acknowledgements while its run
lives, acknowledged when the handler returns, nak'd for a delayed redelivery when it raises,
bounded by the consumer's ``max_deliver``. A wake that fails its last delivery, or whose every
delivery ended without an answer (JetStream's MAX_DELIVERIES advisory: the worker died each
time), is buried as a dead letter (:mod:`drydock.worker.dead_letters`) instead of vanishing.
Cancelling :meth:`WakeConsumer.run` stops fetching and hands unfinished wakes back at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

import structlog
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from pydantic import ValidationError

from drydock.bus import Bus, Wake
from drydock.bus.consumers import DurableConsumer, MaxDeliveriesAdvisory, advisory_router, serve
from drydock.bus.streams import run_subscription
from drydock.errors import describe
from drydock.roles import Role
from drydock.worker.dead_letters import DeadLetterOffice

log = structlog.get_logger(__name__)

WakeHandler = Callable[[Wake], Awaitable[None]]

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
        stream: str | None = None,
        durable: str | None = None,
    ) -> None:
        subscription = run_subscription(role)
        self._bus = bus
        self._role = role
        self._dead_letters = dead_letters
        self._max_deliver = max_deliver
        self._stream = stream or subscription.stream
        self._durable = durable or subscription.durable
        self.wakes = DurableConsumer(
            subscription,
            handler,
            concurrency=concurrency,
            max_deliver=max_deliver,
            heartbeat=heartbeat,
            fetch_timeout=fetch_timeout,
            on_last_failure=self._gave_up,
            stream=self._stream,
            durable=self._durable,
        )

    async def run(self) -> None:
        """Consume the wakes and the max-deliveries advisory until cancelled; on cancellation
        hand every unfinished wake back."""
        await serve(self._bus.nc, self.wakes, advisory_router(self._stream, self._durable, self._exhausted))

    async def _gave_up(self, wake: Wake, message: Msg, error: Exception) -> None:
        sequence = message.metadata.sequence.stream if message.metadata.sequence else 0
        deliveries = message.metadata.num_delivered or self._max_deliver
        await self._dead_letters.bury(
            wake, sequence=sequence, deliveries=deliveries, error=f"{type(error).__name__}: {error}"
        )

    async def _exhausted(self, advisory: MaxDeliveriesAdvisory) -> None:
        """A wake whose deliveries all timed out: bury it and remove it from the work queue."""
        sequence, deliveries = advisory.stream_seq, advisory.deliveries or self._max_deliver
        try:
            stored = await self._bus.js.get_msg(self._stream, sequence)
            wake = Wake.model_validate_json(stored.data or b"")
        except (NatsError, ValidationError) as error:
            log.error("max-deliveries advisory not handled", stream=self._stream, error=describe(error))
            return
        await self._dead_letters.bury(wake, sequence=sequence, deliveries=deliveries, error=UNANSWERED)
        with contextlib.suppress(NatsError):
            await self._bus.js.delete_msg(self._stream, sequence)
