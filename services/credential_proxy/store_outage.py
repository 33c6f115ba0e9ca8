"""A store outage is a 503 the client may retry, never a 500 that reads as final.

While Redis restarts, a grant cannot be looked up: the proxy answers ``503`` with ``Retry-After``
in the route's refusal shape (git prints it as ``The requested URL returned error: 503``), and
the worker's clone retries it (:mod:`drydock.worker.checkouts`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog
from aiohttp import web
from redis.exceptions import RedisError

from drydock.errors import describe
from drydock.infra.redis import StoreUnavailable
from services.credential_proxy.grant_auth import Route, refusal
from services.credential_proxy.metrics import REQUESTS

log = structlog.get_logger(__name__)

RETRY_AFTER_SECONDS = 2

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def store_outage(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except (RedisError, StoreUnavailable) as error:
        route: Route = "git" if "endpoint" in request.match_info else "api"
        REQUESTS.labels(route, "store_unavailable").inc()
        log.warning("store unavailable; answered 503", route=route, method=request.method, error=describe(error))
        response = refusal(route, 503, "the store is unavailable for a moment; retry shortly")
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
