"""``{proxy}/g/{grant}/git/{owner}/{name}[.git]/{endpoint}``: git smart HTTP to the code host.

Only the smart-HTTP endpoints are served (``info/refs`` with GET, ``git-upload-pack`` and
``git-receive-pack`` with POST; another method is a 405, a repeated ``service`` parameter a 400);
pushes need a read-write grant for the repository, during an autofix repair of the grant's
thread a reported confidence at or above the repair's threshold, under plan approval the owner's
approval of the thread's plan, and for a push that changes protected paths the owner's approval
of that exact push (:mod:`.approval_gates`).
"""

from __future__ import annotations

from aiohttp import web
from yarl import URL

from services.credential_proxy.approval_gates import plan_denial, receive_pack
from services.credential_proxy.context import CONTEXT
from services.credential_proxy.denials import record_denial
from services.credential_proxy.forwarding import forward
from services.credential_proxy.grant_auth import Refused, authenticate, refusal
from services.credential_proxy.injection import git_authorization, upstream_token
from services.credential_proxy.policy import GIT_ENDPOINTS, confidence_denial, git_denial, is_push

PATTERN = "/g/{grant}/git/{owner}/{name}/{endpoint:.+}"


async def handle_git(request: web.Request) -> web.StreamResponse:
    ctx = request.app[CONTEXT]
    owner, name = request.match_info["owner"], request.match_info["name"].removesuffix(".git")
    endpoint = request.match_info["endpoint"]
    repository = f"{owner}/{name}"
    method = GIT_ENDPOINTS.get(endpoint)
    if method is None:
        return refusal("git", 404, f"{endpoint} is not a git smart-HTTP endpoint")
    if request.method != method:
        # Only a POST to git-receive-pack is inspected for protected paths: another method must not reach upstream.
        refused = refusal("git", 405, f"{endpoint} takes {method} only")
        refused.headers["Allow"] = method
        return refused
    if len(request.query.getall("service", [])) > 1:
        # The policy reads one value and the upstream may read another.
        return refusal("git", 400, "give the service parameter once")
    try:
        grant, sealed = await authenticate(ctx, request.match_info["grant"], "git")
        service = request.query.get("service")
        denial = git_denial(grant, repository, endpoint, service)
        if denial is None and is_push(endpoint, service):
            denial = confidence_denial(await ctx.repairs.active(grant.thread_id))
            if denial is None:
                denial = await plan_denial(ctx, grant)
        if denial is not None:
            await record_denial(
                ctx, grant, denial, route="git", method=request.method, target=f"{repository}/{endpoint}"
            )
            return refusal("git", 403, denial.message)
        token = await upstream_token(ctx, grant, sealed, "git")
    except Refused as refused:
        return refused.response
    # Upstream, settings and mirrors get the name as issued, not as the sandbox spelled it.
    repository = grant.repository or repository
    url = URL(f"{ctx.git_upstream}/{repository}.git/{endpoint}").with_query(request.rel_url.query)
    if endpoint == "git-receive-pack":
        return await receive_pack(request, ctx, grant, repository, token, url)
    return await forward(request, ctx.session, url, authorization=git_authorization(token), route="git")
