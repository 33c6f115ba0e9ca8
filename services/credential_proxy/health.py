"""``/healthz`` (the process answers), ``/readyz`` (NATS, Redis and the store epoch)
and ``/metrics`` (Prometheus)."""

from __future__ import annotations

from aiohttp import web

from drydock.http import readiness
from drydock.telemetry import metrics_response
from services.credential_proxy.context import CONTEXT


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    checks = await readiness(ctx.runtime)
    ready = all(value == "ok" for value in checks.values())
    return web.json_response(
        {"status": "ready" if ready else "not ready", "checks": checks}, status=200 if ready else 503
    )


async def metrics(request: web.Request) -> web.Response:
    body, content_type = metrics_response()
    return web.Response(body=body, headers={"Content-Type": content_type})
