"""The controller's two durable consumers, on FastStream's JetStream pull subscriber
(:class:`drydock.bus.consumers.DurableConsumer`): ``drydock.github.*`` (``autofix``) and run
endings (``autofix-runs``), provisioned at start-up, never here.

A message is acknowledged when its handler returns, so whatever the handler published (its
decision event, a repair request) was acknowledged by JetStream first. A handler error naks it
for a delayed redelivery, bounded by the consumer's ``max_deliver``, after which it is
terminated and logged; an unreadable message, or one the controller can never handle
(:class:`~drydock.bus.consumers.Drop`), is logged and acknowledged.
"""

from __future__ import annotations

import asyncio

from nats.aio.client import Client as NatsClient

from drydock.autofix.controller import AutofixController, GithubUnavailable
from drydock.bus import GithubEvent, RunEvent
from drydock.bus.consumers import Drop, DurableConsumer, serve
from drydock.bus.streams import GITHUB_EVENTS, RUN_ENDINGS

RUN_ENDINGS_CONCURRENCY = 8
_MAX_NAK_DELAY = 30.0


class ControllerConsumers:
    """Feeds GitHub events and run endings to one term's controller."""

    def __init__(self, controller: AutofixController, *, concurrency: int, max_deliver: int) -> None:
        self._controller = controller
        self.github = DurableConsumer(
            GITHUB_EVENTS, self.on_github, concurrency=concurrency, max_deliver=max_deliver,
            max_nak_delay=_MAX_NAK_DELAY, drop_unreadable=True,
        )  # fmt: skip
        self.run_endings = DurableConsumer(
            RUN_ENDINGS, self.on_run_end, concurrency=RUN_ENDINGS_CONCURRENCY, max_deliver=max_deliver,
            max_nak_delay=_MAX_NAK_DELAY, drop_unreadable=True,
        )  # fmt: skip

    async def on_github(self, event: GithubEvent) -> None:
        try:
            await self._controller.handle(event)
        except GithubUnavailable as missing:
            raise Drop(str(missing)) from None

    async def on_run_end(self, event: RunEvent) -> None:
        await self._controller.run_ended(event)

    async def run(self, nc: NatsClient, stop: asyncio.Event) -> None:
        """Consume both until ``stop`` is set or the task is cancelled; messages still being
        handled then are handed back for the next leader."""
        await serve(nc, self.github, self.run_endings, stop=stop)
