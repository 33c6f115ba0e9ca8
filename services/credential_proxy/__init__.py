"""The ``credential-proxy`` service: sandboxes reach the code host (git smart HTTP and the REST
API) and the allowed parts of the internet only through it.

The path of a request: :mod:`.app` routes ``/g/{grant}/git/…`` to :mod:`.git_route` and
``/g/{grant}/api/…`` to :mod:`.api_route` → :mod:`.grant_auth` resolves the grant →
:mod:`.policy` decides (denials recorded by :mod:`.denials`) → :mod:`.injection` fetches the
real token → :mod:`.forwarding` streams to the upstream. :mod:`.egress` is the forward proxy
with its :mod:`.allowlist`.
"""

import asyncio

from drydock.infra.collector import freeze_startup_objects
from drydock.runtime import Runtime
from drydock.services import Service
from services.credential_proxy.server import serving


async def run(runtime: Runtime) -> None:
    async with serving(runtime):
        freeze_startup_objects()
        await asyncio.Event().wait()


def listens(runtime: Runtime) -> str:
    proxy = runtime.settings.proxy
    return f"http://{proxy.host}:{proxy.port} (git, API, health), egress http://{proxy.host}:{proxy.egress_port}"


service = Service(
    name="credential-proxy",
    description="injects per-sandbox credentials for git and the code host's API; egress allowlist",
    run=run,
    listens=listens,
)
