"""The proxy's request spans, continuing the trace of a request that carries ``traceparent``.

git in a sandbox sends it when the daemon ran git for a traced run
(:mod:`drydock.sandbox.daemon.trace_context`). Spans are named by the route's pattern and carry
no URL: the path holds the grant.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from drydock.telemetry.tracing import enabled, served_request

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def traced(request: web.Request, handler: Handler) -> web.StreamResponse:
    resource = request.match_info.route.resource
    name = f"{request.method} {resource.canonical}" if resource is not None else request.method
    with served_request(request.headers, name) as span:
        response = await handler(request)
        if span is not None:
            span.set_attribute("http.request.method", request.method)
            span.set_attribute("http.response.status_code", response.status)
        return response


def tracing_middlewares() -> list[Middleware]:
    """The middleware when tracing is on; none otherwise."""
    return [traced] if enabled() else []
