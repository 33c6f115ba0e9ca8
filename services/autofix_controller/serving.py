"""The controller process: stand by until it holds the controller lease, then, while it leads,
consume ``drydock.github.*`` (durable consumer ``autofix``) and run endings (``autofix-runs``),
scan open agent pull requests every ``monitor_interval``, ask GitHub again for the webhook
deliveries it recorded as failed (:mod:`drydock.channels.github.redelivery`), and run the
scheduler (due wake-ups and recurring schedules of :mod:`drydock.scheduler`).
When the lease is lost, all of it stops and the replica stands by again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import structlog

from drydock.autofix.controller import AutofixController
from drydock.autofix.github import AutofixGithub
from drydock.autofix.leadership import Leadership, Term
from drydock.autofix.monitor import Monitor
from drydock.channels.github.redelivery import Redeliveries
from drydock.github import GithubClient
from drydock.runtime import Runtime
from drydock.scheduler import Schedules, Wakeups
from drydock.telemetry.logging import configuration_gap
from services.autofix_controller.consumer import ControllerConsumers

log = structlog.get_logger(__name__)


@dataclass
class ControllerService:
    runtime: Runtime
    github: AutofixGithub | None
    leadership: Leadership
    controller: AutofixController | None = None
    """The current term's controller, while this replica leads."""

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Lead whenever this replica holds the lease, until cancelled (or ``stop`` is set)."""
        stop = stop or asyncio.Event()
        leading = asyncio.create_task(self.leadership.run(self.lead, stop=stop), name="autofix-leadership")
        try:
            # Not ``await leading``: that hands our cancellation to the lease loop, which talks to
            # Redis and can swallow it (AGENTS.md). Waiting keeps it here, so the flag is set.
            await asyncio.wait({leading})
        finally:
            stop.set()
            leading.cancel()
            await asyncio.gather(leading, return_exceptions=True)
        leading.result()

    async def lead(self, term: Term) -> None:
        runtime = self.runtime
        settings = runtime.settings
        controller = AutofixController(
            settings, runtime.bus, runtime.redis, runtime.keys, self.github, fence=term.fence
        )
        self.controller = controller

        poll = settings.autofix.scheduler_poll.total_seconds()
        consumers = ControllerConsumers(
            controller, concurrency=settings.autofix.concurrency, max_deliver=settings.nats.run_max_deliver
        )
        loops = [
            consumers.run(runtime.bus.nc, term.ended),
            Wakeups(runtime.redis, runtime.keys).run_forever(runtime.bus, interval=poll, stop=term.ended),
            Schedules(runtime.redis, runtime.keys).run_forever(runtime.bus, interval=poll, stop=term.ended),
        ]
        if self.github is not None:
            loops.append(
                Monitor(controller).run_forever(
                    interval=settings.autofix.monitor_interval.total_seconds(), stop=term.ended
                )
            )
            if settings.github.redeliver_attempts > 0:
                redeliveries = Redeliveries(self.github.client, runtime.redis, runtime.keys, settings.github)
                loops.append(redeliveries.run_forever(stop=term.ended))
        else:
            configuration_gap(
                log,
                logging.WARNING,
                "no GitHub App is configured: autofix records events but cannot repair, failed webhook deliveries "
                "are not asked for again; the scheduler runs",
            )
        tasks = [asyncio.create_task(loop) for loop in loops]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()
        finally:
            self.controller = None
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


@contextlib.asynccontextmanager
async def controller_service(runtime: Runtime, *, owner: str | None = None) -> AsyncIterator[ControllerService]:
    """The controller of this replica on ``runtime``; closes its GitHub clients on exit."""
    settings = runtime.settings
    owner = owner or f"autofix@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
    leadership = Leadership(runtime.redis, runtime.keys, owner=owner, ttl=settings.autofix.lease_ttl)
    async with contextlib.AsyncExitStack() as stack:
        github: AutofixGithub | None = None
        if settings.github.app_id is not None and settings.github.private_key is not None:
            client = GithubClient(settings.github)
            stack.push_async_callback(client.aclose)
            github = AutofixGithub(client)
        yield ControllerService(runtime, github, leadership)
