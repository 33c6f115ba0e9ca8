"""The ingress's wiring: its router factory (mounted by the web-only process too) and the
standalone service (``drydock serve ingress``)."""

from __future__ import annotations

import gc

from fastapi import APIRouter

from drydock.http import create_app, serve
from drydock.runtime import Runtime
from services.ingress.accept import Ingress
from services.ingress.webhooks import webhook_router

GC_YOUNG_THRESHOLD = 10_000
"""Net allocations between young collections (Python's default: 700). A delivery's objects die
by reference counting within milliseconds; at 700 the collector ran every 14 deliveries under
load and promoted the objects of the deliveries in flight to older generations, about 9 µs of
CPU per delivery. Measured at 10,000: no collection in 5,500 deliveries."""


def _freeze_startup_objects() -> None:
    # Everything imported so far lives for the whole process; left in the collector's view,
    # each full collection walks it and stalls every request in flight (~100 ms here).
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


def router(runtime: Runtime) -> APIRouter:
    """The ingress's router factory (mounted by ``services.web.app``): the webhook endpoints on ``runtime``."""
    ingress = Ingress.from_runtime(runtime)
    _freeze_startup_objects()
    return webhook_router(ingress)


async def run(runtime: Runtime) -> None:
    """Serve the ingress alone (health, readiness, metrics and the webhooks) until cancelled."""
    ingress = Ingress.from_runtime(runtime)
    http = runtime.settings.http
    _freeze_startup_objects()
    try:
        await serve(create_app("ingress", runtime, [lambda _: webhook_router(ingress)]), http)
    finally:
        await ingress.aclose()


def listens(runtime: Runtime) -> str:
    http = runtime.settings.http
    return f"http://{http.host}:{http.port}/webhooks/{{github,linear,slack/events,slack/interactivity}}"
