"""A deadline on receiving a request, so that a client that stops sending cannot hold a
connection (and a spooled push) forever: ``proxy.read_timeout`` for its head, from the
connection's opening or the previous answer (aiohttp's keep-alive timeout, set to it in
:mod:`.server`), and again for its body, from the head's arrival. A body not received in time
closes the connection; the handler reading it fails and cleans up."""

from __future__ import annotations

import asyncio

import structlog
from aiohttp import web

from services.credential_proxy.context import CONTEXT
from services.credential_proxy.store_outage import Handler

log = structlog.get_logger(__name__)


@web.middleware
async def read_deadline(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.content.is_eof():
        return await handler(request)
    limit = request.app[CONTEXT].runtime.settings.proxy.read_timeout.total_seconds()
    expired = False

    def expire() -> None:
        nonlocal expired
        if request.content.is_eof() or request.transport is None:
            return
        expired = True
        log.info("request body not received in time; connection closed", method=request.method, limit_seconds=limit)
        request.transport.close()

    timer = asyncio.get_running_loop().call_later(limit, expire)
    try:
        return await handler(request)
    except Exception:
        if not expired:
            raise
        # The connection is closed: this answer only ends the handler without an error logged.
        return web.Response(status=408)
    finally:
        timer.cancel()
