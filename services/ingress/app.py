"""The ingress's wiring: its router factory (mounted by the web-only process too) and the
standalone service (``drydock serve ingress``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from fastapi import APIRouter

from drydock.http import create_app, serve
from drydock.infra.collector import freeze_startup_objects
from drydock.runtime import Runtime
from services.ingress.accept import Ingress
from services.ingress.identities import learn_linear_agent, needs_linear_agent
from services.ingress.webhooks import webhook_router


@contextlib.asynccontextmanager
async def router(runtime: Runtime) -> AsyncIterator[APIRouter]:
    """The ingress's router factory (mounted by ``services.web.app``): the webhook endpoints on
    ``runtime``, and its clients closed and its last done marks written when the app stops."""
    ingress = Ingress.from_runtime(runtime)
    learning = asyncio.create_task(learn_linear_agent(ingress)) if needs_linear_agent(ingress) else None
    freeze_startup_objects()
    try:
        yield webhook_router(ingress)
    finally:
        if learning is not None:
            learning.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await learning
        await ingress.aclose()


async def run(runtime: Runtime) -> None:
    """Serve the ingress alone (health, readiness, metrics and the webhooks) until cancelled."""
    await serve(create_app("ingress", runtime, [router]), runtime.settings.http)


def listens(runtime: Runtime) -> str:
    http = runtime.settings.http
    return f"http://{http.host}:{http.port}/webhooks/{{github,linear,slack/events,slack/interactivity}}"
