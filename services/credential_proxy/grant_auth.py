"""Resolving the grant a sandbox presents, and refusing clearly when it cannot be used.

Refusals are shaped for the client that will read them: git shows a ``text/plain`` body of a
failed request as ``remote: …`` lines (and would prompt for a password on a 401, hiding the
message), so git refusals are 403 with text; API clients get GitHub's JSON error shape, with
401 for an unusable grant as GitHub answers bad credentials.
"""

from __future__ import annotations

from typing import Literal

import structlog
from aiohttp import web

from drydock.credentials import Grant, GrantRejected
from services.credential_proxy.context import ProxyContext
from services.credential_proxy.metrics import REQUESTS

log = structlog.get_logger(__name__)

Route = Literal["git", "api"]
DOCS = "https://docs.github.com/rest"


def refusal(route: Route, status: int, message: str) -> web.Response:
    if route == "git":
        return web.Response(status=403 if status == 401 else status, text=f"drydock credential proxy: {message}\n")
    return web.json_response(
        {"message": f"drydock credential proxy: {message}", "documentation_url": DOCS}, status=status
    )


class Refused(Exception):
    """Raised inside a handler to answer with :attr:`response`."""

    def __init__(self, response: web.Response) -> None:
        super().__init__(response.text)
        self.response = response


async def authenticate(ctx: ProxyContext, token: str, route: Route) -> tuple[Grant, str | None]:
    """The live grant for ``token`` and its upstream token as stored (for
    :func:`~services.credential_proxy.injection.upstream_token`), read together; :class:`Refused`
    otherwise (logged with the thread id if known)."""
    try:
        return await ctx.credentials.resolve(token)
    except GrantRejected as rejected:
        REQUESTS.labels(route, "rejected").inc()
        known = await ctx.grants.get(token)
        log.warning(
            "proxy rejected grant",
            route=route,
            reason=type(rejected).__name__,
            thread_id=known.thread_id if known else None,
            sandbox_id=known.sandbox_id if known else None,
        )
        raise Refused(refusal(route, 401, str(rejected))) from None
