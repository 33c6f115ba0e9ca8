"""The reverse proxy's aiohttp application: git and API routes under the grant, plus health."""

from __future__ import annotations

from aiohttp import web

from services.credential_proxy import api_route, git_route, health
from services.credential_proxy.context import CONTEXT, ProxyContext
from services.credential_proxy.read_deadline import read_deadline
from services.credential_proxy.store_outage import store_outage
from services.credential_proxy.tracing import tracing_middlewares


def create_app(ctx: ProxyContext) -> web.Application:
    app = web.Application(middlewares=[*tracing_middlewares(), read_deadline, store_outage])
    app[CONTEXT] = ctx
    app.router.add_get("/healthz", health.healthz)
    app.router.add_get("/readyz", health.readyz)
    app.router.add_get("/metrics", health.metrics)
    app.router.add_route("*", git_route.PATTERN, git_route.handle_git)
    for pattern in api_route.PATTERNS:
        app.router.add_route("*", pattern, api_route.handle_api)
    return app
