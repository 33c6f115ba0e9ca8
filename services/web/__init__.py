"""The web-only process: the ingress's and the dashboard's routers (``services.web.app.ROUTERS``)
in one ASGI app."""

from drydock.http import create_app, serve
from drydock.runtime import Runtime
from drydock.services import Service
from services.web.app import ROUTERS


async def run(runtime: Runtime) -> None:
    http = runtime.settings.http
    await serve(create_app("web", runtime, ROUTERS), http)


def listens(runtime: Runtime) -> str:
    return f"http://{runtime.settings.http.host}:{runtime.settings.http.port}"


service = Service(
    name="web", description="ingress and dashboard in one app", run=run, listens=listens, http_workers=True
)
