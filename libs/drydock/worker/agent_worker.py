"""A whole agent worker for one role: the wake consumer, the thread runner, and everything a
run needs, wired from a service's runtime. The coder, reviewer and analyzer workers differ only
in their role's spec (:mod:`drydock.worker.roles`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import structlog

from drydock.channels.outbound import Outbound
from drydock.checkpoints import open_checkpointer
from drydock.credentials import CipherError, ProxyCredentials
from drydock.graphs.manifest import Manifest
from drydock.models import Models
from drydock.roles import Role
from drydock.runtime import Runtime
from drydock.sandbox.credentials import NoProxy, SandboxCredentials
from drydock.sandbox.lifecycle import SandboxManager
from drydock.sandbox.snapshots import SnapshotStore
from drydock.telemetry.langsmith import keep_untraced_bookkeeping_inline
from drydock.telemetry.logging import configuration_gap
from drydock.threads import Inbox, Leases
from drydock.worker.agent_runs import AgentRuns, RunParts
from drydock.worker.dead_letters import DeadLetterOffice
from drydock.worker.lease_sweeper import LeaseSweeper
from drydock.worker.role_spec import RoleSpec
from drydock.worker.thread_runner import ThreadRunner
from drydock.worker.wake_consumer import WakeConsumer

log = structlog.get_logger(__name__)

REAP_INTERVAL = 60.0
SWEEP_INTERVAL = 1.0


@dataclass(frozen=True)
class AgentWorker:
    role: Role
    consumer: WakeConsumer
    runs: AgentRuns
    sandboxes: SandboxManager
    sweeper: LeaseSweeper

    async def run(self) -> None:
        """Consume wakes, resume threads whose holder died and reap idle sandboxes until
        cancelled; unfinished wakes are handed back. (Due wake-ups are fired by the scheduler
        in the autofix controller.)"""
        reaper = asyncio.create_task(self.sandboxes.reap_forever(REAP_INTERVAL), name="sandbox-reaper")
        sweeper = asyncio.create_task(self.sweeper.run(), name="lease-sweeper")
        try:
            await self.consumer.run()
        finally:
            self.sweeper.stop()
            reaper.cancel()
            sweeper.cancel()
            await asyncio.gather(reaper, sweeper, return_exceptions=True)


def _credentials(runtime: Runtime) -> tuple[SandboxCredentials, ProxyCredentials | None]:
    try:
        broker = ProxyCredentials.from_runtime(runtime)
    except CipherError as error:
        configuration_gap(
            log, logging.ERROR, "sandboxes get no code host access: credentials cannot be stored", reason=str(error)
        )
        return NoProxy(), None
    return broker, broker


@contextlib.asynccontextmanager
async def agent_worker(
    runtime: Runtime,
    spec: RoleSpec,
    *,
    manifest: Manifest | None = None,
    owner: str | None = None,
    outbound: Outbound | None = None,
) -> AsyncIterator[AgentWorker]:
    """Build the worker of the role ``spec`` declares on ``runtime``; close what it opened on exit.

    Raises :class:`~drydock.models.ModelError` when the configured default or fallback model is
    not in the catalog, and :class:`~drydock.graphs.manifest.ManifestError` when the role has no
    graph.
    """
    settings = runtime.settings
    keep_untraced_bookkeeping_inline()
    role = spec.role
    factory = (manifest or Manifest.load()).graph_factory(spec.graph)
    models = Models(settings.models)
    if not models.configured:
        configuration_gap(
            log, logging.WARNING, "no model endpoint is configured; threads will be answered with how to configure one"
        )
    owner = owner or f"{role.value}@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
    credentials, broker = _credentials(runtime)
    snapshots = SnapshotStore(runtime.bus.js, settings.snapshots)
    async with contextlib.AsyncExitStack() as stack:
        if broker is not None:
            stack.push_async_callback(broker.aclose)
        checkpointer = await stack.enter_async_context(open_checkpointer(settings.redis))
        if outbound is None:
            outbound = Outbound.from_settings(settings)
            stack.push_async_callback(outbound.aclose)
        http = await stack.enter_async_context(
            httpx.AsyncClient(timeout=settings.tools.timeout, follow_redirects=False, trust_env=False)
        )
        sandboxes = SandboxManager.from_runtime(runtime, credentials=credentials, snapshots=snapshots)
        stack.push_async_callback(sandboxes.aclose)
        runs = AgentRuns(
            RunParts(
                spec=spec,
                factory=factory,
                settings=settings,
                bus=runtime.bus,
                redis=runtime.redis,
                keys=runtime.keys,
                sandboxes=sandboxes,
                checkpointer=checkpointer,
                outbound=outbound,
                models=models,
                http=http,
                snapshots=snapshots,
            )
        )
        runner = ThreadRunner(
            Leases(runtime.redis, runtime.keys, ttl=settings.lease.ttl), Inbox(runtime.bus), runs, owner=owner
        )
        consumer = WakeConsumer(
            runtime.bus,
            role,
            runner,
            dead_letters=DeadLetterOffice(runtime.bus, runtime.redis, runtime.keys, outbound),
            concurrency=settings.worker.concurrency,
            heartbeat=settings.worker.heartbeat.total_seconds(),
            max_deliver=settings.nats.run_max_deliver,
        )
        sweeper = LeaseSweeper(runtime.bus, runtime.redis, runtime.keys, role=role, interval=SWEEP_INTERVAL)
        yield AgentWorker(role, consumer, runs, sandboxes, sweeper)
