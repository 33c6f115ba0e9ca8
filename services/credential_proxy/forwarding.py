"""Streaming a request to an upstream and its response back, with the sandbox's credential
replaced by the real one. Bodies are copied chunk by chunk in both directions (git packs can be
gigabytes); compressed bodies pass through untouched."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

import aiohttp
import structlog
from aiohttp import StreamReader, web
from multidict import CIMultiDict
from yarl import URL

from drydock.errors import describe
from services.credential_proxy.metrics import REQUESTS, UPSTREAM_SECONDS

log = structlog.get_logger(__name__)

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
# Never passed upstream: the sandbox's own credential (a placeholder at best) and the Host we were reached at.
_REPLACED = frozenset({"authorization", "host", "cookie", "expect"})


def upstream_headers(request: web.Request, authorization: str) -> CIMultiDict[str]:
    headers: CIMultiDict[str] = CIMultiDict()
    for name, value in request.headers.items():
        lowered = name.lower()
        if lowered not in HOP_BY_HOP and lowered not in _REPLACED:
            headers.add(name, value)
    headers["Authorization"] = authorization
    return headers


async def forward(
    request: web.Request,
    session: aiohttp.ClientSession,
    url: URL,
    *,
    authorization: str,
    route: str,
    rewrite_location: Callable[[str], str] | None = None,
    body: AsyncIterator[bytes] | None = None,
) -> web.StreamResponse:
    """Send ``request`` to ``url`` with ``authorization`` and stream the answer back; ``body``
    replaces the request's own (a copy spooled to inspect it)."""
    started = time.perf_counter()
    data: AsyncIterator[bytes] | StreamReader | None = (
        body if body is not None else request.content if request.body_exists else None
    )
    try:
        upstream = await session.request(
            request.method,
            url,
            headers=upstream_headers(request, authorization),
            data=data,
            allow_redirects=False,
        )
    except (aiohttp.ClientError, TimeoutError) as error:
        REQUESTS.labels(route, "upstream_error").inc()
        log.warning("upstream unreachable", route=route, upstream=str(url.origin()), error=describe(error))
        return web.Response(status=502, text=f"drydock credential proxy: upstream {url.origin()} unreachable\n")
    UPSTREAM_SECONDS.labels(route).observe(time.perf_counter() - started)
    try:
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for name, value in upstream.headers.items():
            lowered = name.lower()
            if lowered in HOP_BY_HOP or lowered == "content-length":
                continue
            if rewrite_location is not None and lowered in {"location", "link"}:
                value = rewrite_location(value)
            response.headers.add(name, value)
        if upstream.content_length is not None:
            response.content_length = upstream.content_length
        await response.prepare(request)
        async for chunk in upstream.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
    finally:
        upstream.release()
    REQUESTS.labels(route, "forwarded").inc()
    return response
