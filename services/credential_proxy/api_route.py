"""``{proxy}/g/{grant}/api/{path}``: the code host's REST API (``GITHUB_API_URL`` in the
sandbox). Read-only grants may use GET, HEAD and OPTIONS; ``/repos/{owner}/{name}/…`` must name
the grant's repository; during an autofix repair or under plan approval, API writes wait like
pushes do, but for the few that change no code (:func:`~.policy.gate_applies`), and GraphQL
requests are read to see which mutations they ask for. Where the repository has protected paths,
writes of files and git data (REST or GraphQL) are refused: only a git push can be held for the
owner's approval. ``Location`` and ``Link`` headers
pointing at the upstream API are rewritten to point back through the proxy, so pagination keeps
working."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web
from yarl import URL

from drydock.credentials import Grant
from services.credential_proxy.approval_gates import plan_denial, protected_paths_denial
from services.credential_proxy.context import CONTEXT, ProxyContext
from services.credential_proxy.denials import record_denial
from services.credential_proxy.forwarding import forward
from services.credential_proxy.grant_auth import Refused, authenticate, refusal
from services.credential_proxy.graphql_mutations import request_mutations
from services.credential_proxy.injection import api_authorization, upstream_token
from services.credential_proxy.policy import (
    FILE_MUTATIONS,
    UNGATED_MUTATIONS,
    Denial,
    api_denial,
    confidence_denial,
    gate_applies,
    is_graphql,
    writes_files,
)

PATTERNS = ("/g/{grant}/api", "/g/{grant}/api/{path:.*}")


async def handle_api(request: web.Request) -> web.StreamResponse:
    ctx = request.app[CONTEXT]
    grant_token = request.match_info["grant"]
    prefix = f"/g/{grant_token}/api"
    raw = request.rel_url.raw_path
    if raw != prefix and not raw.startswith(f"{prefix}/"):
        # The path after the prefix is forwarded as sent: a prefix spelled otherwise would carry the grant upstream.
        return refusal("api", 400, "spell the path's /g/{grant}/api prefix as issued, without percent-encoding")
    raw_path = raw.removeprefix(prefix) or "/"
    try:
        grant, sealed = await authenticate(ctx, grant_token, "api")
        path = request.match_info.get("path", "")
        denial = api_denial(grant, request.method, path)
        body: bytes | None = None
        if denial is None and is_graphql(path) and request.method == "POST":
            body = await request.read()
        if denial is None:
            denial = await _approval_denial(ctx, grant, request, path, raw_path, body)
        if denial is not None:
            await record_denial(ctx, grant, denial, route="api", method=request.method, target=raw_path)
            return refusal("api", 403, denial.message)
        token = await upstream_token(ctx, grant, sealed, "api")
    except Refused as refused:
        return refused.response
    query = request.rel_url.raw_query_string
    url = URL(ctx.api_upstream + raw_path + (f"?{query}" if query else ""), encoded=True)
    through_proxy = f"{request.url.origin()}{prefix}"

    def rewrite(value: str) -> str:
        return value.replace(ctx.api_upstream, through_proxy)

    return await forward(
        request,
        ctx.session,
        url,
        authorization=api_authorization(token),
        route="api",
        rewrite_location=rewrite,
        body=_once(body) if body is not None else None,
    )


async def _approval_denial(
    ctx: ProxyContext, grant: Grant, request: web.Request, path: str, raw_path: str, graphql: bytes | None
) -> Denial | None:
    """Why a write must wait for the repair's confidence or the owner's approval of the plan, or
    is refused because it could change a protected path without being held; ``None`` if it may go.
    ``graphql`` is the body of a GraphQL request."""
    mutations: frozenset[str] | None = None
    # GraphQL parameters in the query string would escape the body's reading.
    if graphql is not None and not request.rel_url.raw_query_string:
        mutations = request_mutations(graphql, request.headers.get("Content-Encoding", ""))
    if gate_applies(request.method, raw_path) and (
        graphql is None or mutations is None or not mutations <= UNGATED_MUTATIONS
    ):
        denial = confidence_denial(await ctx.repairs.active(grant.thread_id))
        if denial is None:
            denial = await plan_denial(ctx, grant)
        if denial is not None:
            return denial
    if writes_files(request.method, path) or (
        graphql is not None and (mutations is None or bool(mutations & FILE_MUTATIONS))
    ):
        return await protected_paths_denial(ctx, grant)
    return None


async def _once(body: bytes) -> AsyncIterator[bytes]:
    yield body
