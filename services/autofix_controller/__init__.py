"""The ``autofix-controller`` service (DESIGN.md section 8): keeps the agent's own pull requests
green, and hosts the scheduler. One replica is active at a time (a Redis lease); the others
stand by. The decisions themselves live in :mod:`drydock.autofix`; :mod:`.serving` runs them
while this replica leads, fed by :mod:`.consumer`.
"""

from __future__ import annotations

from drydock.infra.collector import freeze_startup_objects
from drydock.runtime import Runtime
from drydock.services import Service
from services.autofix_controller.serving import controller_service


async def run(runtime: Runtime) -> None:
    async with controller_service(runtime) as controller:
        freeze_startup_objects()
        await controller.run()


def listens(runtime: Runtime) -> str:
    return "drydock.github.* and run endings, when it holds the controller lease; the monitor and the scheduler"


service = Service(
    name="autofix-controller",
    description="keeps the agent's pull requests green: the autofix policy, repair runs, the monitor, the scheduler",
    run=run,
    listens=listens,
    has_http=False,
)
