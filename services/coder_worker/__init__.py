"""The ``coder-worker`` service: runs the coder agent for every thread woken on
``drydock.run.coder.*``, several threads at a time (DESIGN.md section 3)."""

from __future__ import annotations

from drydock import model_catalog
from drydock.infra.collector import freeze_startup_objects
from drydock.runtime import Runtime
from drydock.services import Service
from drydock.worker.agent_worker import agent_worker
from drydock.worker.roles.coder import SPEC


async def run(runtime: Runtime) -> None:
    async with agent_worker(runtime, SPEC) as worker:
        freeze_startup_objects()
        await worker.run()


def listens(runtime: Runtime) -> str:
    return f"drydock.run.coder.* ({runtime.settings.worker.concurrency} runs at a time)"


service = Service(
    name="coder-worker",
    description="runs the coder agent: sandbox, tools, pull requests and replies",
    run=run,
    listens=listens,
    has_http=False,
    check=model_catalog.check_settings,
)
