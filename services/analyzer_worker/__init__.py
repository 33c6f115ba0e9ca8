"""The ``analyzer-worker`` service: runs the analyzer agent for every thread woken on
``drydock.run.analyzer.*``, learning each repository's review guidelines (bootstrap, then
scheduled continual refinement; DESIGN.md section 6)."""

from __future__ import annotations

from drydock import model_catalog
from drydock.infra.collector import freeze_startup_objects
from drydock.runtime import Runtime
from drydock.services import Service
from drydock.worker.agent_worker import agent_worker
from drydock.worker.roles.analyzer import SPEC


async def run(runtime: Runtime) -> None:
    async with agent_worker(runtime, SPEC) as worker:
        freeze_startup_objects()
        await worker.run()


def listens(runtime: Runtime) -> str:
    return f"drydock.run.analyzer.* ({runtime.settings.worker.concurrency} runs at a time)"


service = Service(
    name="analyzer-worker",
    description="runs the analyzer agent: learns and refines each repository's review guidelines",
    run=run,
    listens=listens,
    has_http=False,
    check=model_catalog.check_settings,
)
