"""The real credential for a grant, as each upstream expects it: git over HTTPS takes an
installation token as the basic-auth password of ``x-access-token``; the REST API takes it as
a bearer token."""

from __future__ import annotations

import base64

import structlog

from drydock.credentials import CipherError, Grant, UpstreamToken
from drydock.errors import describe
from drydock.sandbox.credentials import GrantError
from services.credential_proxy.context import ProxyContext
from services.credential_proxy.grant_auth import Refused, Route, refusal
from services.credential_proxy.metrics import REQUESTS

log = structlog.get_logger(__name__)


async def upstream_token(ctx: ProxyContext, grant: Grant, sealed: str | None, route: Route) -> UpstreamToken:
    """The token to inject for ``grant``, from ``sealed`` (as :func:`authenticate` read it) or
    minted anew; :class:`Refused` when there is none to be had."""
    try:
        return await ctx.credentials.upstream_token(grant, sealed)
    except (GrantError, CipherError) as error:
        REQUESTS.labels(route, "unavailable").inc()
        log.error("no upstream token", thread_id=grant.thread_id, sandbox_id=grant.sandbox_id, error=describe(error))
        raise Refused(refusal(route, 502, f"no upstream credential for {grant.repository}: {error}")) from None


def git_authorization(token: UpstreamToken) -> str:
    return "Basic " + base64.b64encode(f"x-access-token:{token.token}".encode()).decode()


def api_authorization(token: UpstreamToken) -> str:
    return f"Bearer {token.token}"
