"""The web-only process: every registered web router (ingress, dashboard) in one ASGI app."""

from drydock.http import create_app, serve, web_routers
from drydock.runtime import Runtime
from drydock.services import Service


async def run(runtime: Runtime) -> None:
    http = runtime.settings.http
    await serve(create_app("web", runtime, web_routers()), http)


def listens(runtime: Runtime) -> str:
    return f"http://{runtime.settings.http.host}:{runtime.settings.http.port}"


service = Service(name="web", description="ingress and dashboard in one app", run=run, listens=listens)
