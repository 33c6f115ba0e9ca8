"""The ``reviewer-worker`` service: runs the read-only reviewer agent for every thread woken on
``drydock.run.reviewer.*`` (pull requests to review, replies on its findings), several threads
at a time (DESIGN.md sections 3 and 6)."""

from __future__ import annotations

from drydock import model_catalog
from drydock.infra.collector import freeze_startup_objects
from drydock.runtime import Runtime
from drydock.services import Service
from drydock.worker.agent_worker import agent_worker
from drydock.worker.roles.reviewer import SPEC


async def run(runtime: Runtime) -> None:
    async with agent_worker(runtime, SPEC) as worker:
        freeze_startup_objects()
        await worker.run()


def listens(runtime: Runtime) -> str:
    return f"drydock.run.reviewer.* ({runtime.settings.worker.concurrency} runs at a time)"


service = Service(
    name="reviewer-worker",
    description="runs the reviewer agent: read-only reviews with findings, published as GitHub reviews",
    run=run,
    listens=listens,
    has_http=False,
    check=model_catalog.check_settings,
)
