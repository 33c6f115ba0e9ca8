"""The ingress's wiring: its router factory (mounted by the web-only process too) and the
standalone service (``drydock serve ingress``)."""

from __future__ import annotations

from fastapi import APIRouter

from drydock.http import create_app, serve
from drydock.infra.collector import freeze_startup_objects
from drydock.runtime import Runtime
from services.ingress.accept import Ingress
from services.ingress.webhooks import webhook_router


def router(runtime: Runtime) -> APIRouter:
    """The ingress's router factory (mounted by ``services.web.app``): the webhook endpoints on ``runtime``."""
    ingress = Ingress.from_runtime(runtime)
    freeze_startup_objects()
    return webhook_router(ingress)


async def run(runtime: Runtime) -> None:
    """Serve the ingress alone (health, readiness, metrics and the webhooks) until cancelled."""
    ingress = Ingress.from_runtime(runtime)
    http = runtime.settings.http
    freeze_startup_objects()
    try:
        await serve(create_app("ingress", runtime, [lambda _: webhook_router(ingress)]), http)
    finally:
        await ingress.aclose()


def listens(runtime: Runtime) -> str:
    http = runtime.settings.http
    return f"http://{http.host}:{http.port}/webhooks/{{github,linear,slack/events,slack/interactivity}}"
