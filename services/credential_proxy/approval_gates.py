"""The thread owner's approvals at the credential proxy (:mod:`drydock.threads.approvals`).

- **Plan gate**: when plan approval applies to the grant's thread (its repository's setting or
  its owner's profile), pushes and API writes (but those that change no code) are refused until the thread's
  newest plan is approved.
- **Protected paths**: a ``git-receive-pack`` POST is spooled to disk, the paths it changes are
  listed with real git (:mod:`.push_inspection`), and a push changing a protected path, or
  adding or changing a symbolic link or a gitlink anywhere, is held
  (a signed record keyed by its exact ref updates), announced once (a ``push_held`` event and a
  notice in the source channel) and answered with git's own report of a rejected ref, which
  ``git push`` shows as ``! [remote rejected] … (held …)``. The same push after the owner's
  approval is forwarded from the spooled copy; any other push is inspected anew.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import os
import tempfile
import zlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import structlog
from aiohttp import web
from pathspec import PathSpec
from yarl import URL

from drydock.accounts.records import DEFAULT_PROTECTED_PATHS, UserProfile
from drydock.bus import BusUnavailable, EventType, RunEvent
from drydock.channels.errors import ChannelNotConfigured
from drydock.credentials import Grant
from drydock.credentials.upstream_token import UpstreamToken
from drydock.errors import describe
from drydock.threads.approvals import PushHold, State, change_id, held_push_notice, plan_required
from services.credential_proxy.context import ProxyContext
from services.credential_proxy.forwarding import forward
from services.credential_proxy.grant_auth import refusal
from services.credential_proxy.injection import git_authorization
from services.credential_proxy.metrics import REQUESTS
from services.credential_proxy.policy import Denial
from services.credential_proxy.push_inspection import (
    HEAD_LIMIT,
    InspectionFailed,
    MalformedPush,
    PushRequest,
    parse_request,
)

log = structlog.get_logger(__name__)

_CHUNK = 1 << 16


async def handle(ctx: ProxyContext) -> str:
    """The mention handle owners approve with (the team's, else the ingress default)."""
    team = await ctx.accounts.team()
    return team.mention_handle or ctx.runtime.settings.ingress.mention_handle


async def plan_denial(ctx: ProxyContext, grant: Grant) -> Denial | None:
    """Why the grant's thread may not push yet under plan approval, or ``None`` if it may."""
    if grant.repository is None:
        return None
    thread = await ctx.metadata.find(grant.thread_id)
    owner = thread.owner if thread is not None else None
    profile: UserProfile | None = await ctx.accounts.profile(owner) if owner else None
    if not plan_required(await ctx.accounts.repository(grant.repository), profile):
        return None
    plan = await ctx.approvals.plan(grant.thread_id)
    if plan is not None and plan.approved:
        return None
    if plan is None:
        return Denial(
            "plan_required",
            "push refused: this thread's changes need a plan approved by its owner first. Write your todo list "
            "with write_todos and call submit_plan with a short description; then end your turn and wait.",
        )
    return Denial(
        "plan_not_approved",
        f"push refused: plan revision {plan.revision} is waiting for this thread owner's approval "
        f"({await handle(ctx)} approve). End your turn and wait; do not push until it is approved.",
    )


async def protected_patterns(ctx: ProxyContext, repository: str) -> tuple[str, ...]:
    settings = await ctx.accounts.repository(repository)
    return settings.protected_paths if settings is not None else DEFAULT_PROTECTED_PATHS


async def protected_paths_denial(ctx: ProxyContext, grant: Grant) -> Denial | None:
    """Why an API write of files or git data is refused: the repository has protected paths, and
    only a push can be inspected and held for the owner's approval. ``None`` without them."""
    if grant.repository is None or not await protected_patterns(ctx, grant.repository):
        return None
    return Denial(
        "protected_paths",
        "refused: this repository has protected paths, and a change made through the API cannot be held for the "
        "thread owner's approval. Commit and push with git instead, so that a change to a protected path is held "
        "for approval.",
    )


def _pkt(data: bytes) -> bytes:
    return f"{len(data) + 4:04x}".encode() + data


def rejection(push: PushRequest, reason: str, detail: str) -> web.Response:
    """Git's report-status for a push whose every ref is rejected with ``reason``; ``detail``
    goes to the client's progress channel (shown as ``remote: …``) when it asked for one."""
    status = _pkt(b"unpack ok\n")
    status += b"".join(_pkt(f"ng {u.ref} {reason}\n".encode()) for u in push.updates) + b"0000"
    if "side-band-64k" in push.capabilities or "side-band" in push.capabilities:
        size = 65515 if "side-band-64k" in push.capabilities else 995
        body = b"".join(_pkt(b"\x02" + f"drydock: {line}\n".encode()) for line in detail.splitlines())
        body += b"".join(_pkt(b"\x01" + status[i : i + size]) for i in range(0, len(status), size))
        body += b"0000"
    else:
        body = status
    return web.Response(status=200, body=body, content_type="application/x-git-receive-pack-result")


async def _spool(request: web.Request, directory: Path, limit: int) -> tuple[Path, Path] | None:
    """The body as sent and decoded (gunzipped if so encoded); ``None`` past ``limit`` bytes of either."""
    descriptor, name = await asyncio.to_thread(tempfile.mkstemp, prefix="body-", dir=directory)
    sent = Path(name)
    size = 0
    try:
        with os.fdopen(descriptor, "wb") as out:
            async for chunk in request.content.iter_chunked(_CHUNK):
                size += len(chunk)
                if size > limit:
                    break
                await asyncio.to_thread(out.write, chunk)
    except BaseException:
        await _remove(sent)
        raise
    if size > limit:
        await asyncio.to_thread(sent.unlink)
        return None
    if request.headers.get("Content-Encoding", "").lower() != "gzip":
        return sent, sent
    decoded = sent.with_name(sent.name + ".decoded")

    def gunzip() -> bool:
        size = 0
        with gzip.open(sent, "rb") as source, decoded.open("wb") as target:
            while chunk := source.read(_CHUNK):
                size += len(chunk)
                if size > limit:
                    return False
                target.write(chunk)
        return True

    try:
        within = await asyncio.to_thread(gunzip)
    except (OSError, EOFError, zlib.error) as error:
        await _remove(sent, decoded)
        raise MalformedPush(f"the gzip-encoded body does not decode ({error})") from None
    if not within:
        await _remove(sent, decoded)
        return None
    return sent, decoded


async def _remove(*paths: Path) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            await asyncio.to_thread(path.unlink)


async def _read(path: Path) -> AsyncIterator[bytes]:
    with path.open("rb") as stream:
        while chunk := await asyncio.to_thread(stream.read, _CHUNK):
            yield chunk


async def _announce(ctx: ProxyContext, grant: Grant, hold: PushHold) -> None:
    """The hold's ``push_held`` event and its notice in the source channel; an outage of either is logged."""
    data = {
        "change": hold.change,
        "repository": hold.repository,
        "refs": [u.line() for u in hold.updates],
        "paths": list(hold.paths),
        "sandbox_id": grant.sandbox_id,
    }
    try:
        await ctx.runtime.bus.emit(RunEvent(thread_id=grant.thread_id, run_id="", type=EventType.PUSH_HELD, data=data))
    except BusUnavailable as error:
        log.error("push_held event not published", thread_id=grant.thread_id, error=describe(error))
    thread = await ctx.metadata.find(grant.thread_id)
    address = thread.reply_to if thread is not None else None
    if address is None or ctx.notices is None:
        return
    try:
        text = held_push_notice(hold, await handle(ctx))
        await ctx.notices.reply(address, text, effect=f"push-held-{hold.change[:16]}", approve_button=True)
    except ChannelNotConfigured as error:
        log.warning("push hold notice not posted", thread_id=grant.thread_id, error=describe(error))
    except Exception as error:
        log.error("push hold notice failed", thread_id=grant.thread_id, error=describe(error))


async def receive_pack(
    request: web.Request, ctx: ProxyContext, grant: Grant, repository: str, token: UpstreamToken, url: URL
) -> web.StreamResponse:
    """Forward a push, unless it changes protected paths without the owner's approval of it."""
    patterns = await protected_patterns(ctx, repository)
    authorization = git_authorization(token)
    if not patterns:
        return await forward(request, ctx.session, url, authorization=authorization, route="git")
    await asyncio.to_thread(ctx.mirror_root.mkdir, parents=True, exist_ok=True)
    try:
        spooled = await _spool(request, ctx.mirror_root, ctx.runtime.settings.proxy.max_inspected_push)
    except MalformedPush as error:
        return refusal("git", 400, f"push refused: {error}")
    try:
        if spooled is None:
            return refusal("git", 413, "push refused: it is larger than the proxy inspects for protected paths")
        sent, decoded = spooled
        with decoded.open("rb") as stream:
            head = await asyncio.to_thread(stream.read, HEAD_LIMIT)
        try:
            push = parse_request(head)
        except MalformedPush as error:
            return refusal("git", 400, f"push refused: {error}")
        try:
            changes = await ctx.mirrors.changes(repository, authorization, decoded, push)
        except InspectionFailed as error:
            log.error("push inspection failed", thread_id=grant.thread_id, repository=repository, error=describe(error))
            return refusal("git", 502, "push refused: the proxy could not inspect it for protected paths; try again")
        spec = PathSpec.from_lines("gitignore", patterns)
        # A symbolic link or a submodule can put what an unprotected path holds where a protected
        # path is read (a link over .github/workflows), which no pattern sees: each is held too.
        protected = tuple(sorted({path for path in changes.paths if spec.match_file(path)} | changes.links))
        if protected:
            change = change_id(repository, push.updates)
            existing = await ctx.approvals.push(grant.thread_id, change)
            if existing is None or not existing.approved:
                hold, created = await ctx.approvals.hold(
                    PushHold(
                        grant.thread_id, change, repository, push.updates, protected, State.HELD, datetime.now(UTC)
                    )
                )
                if created:
                    await _announce(ctx, grant, hold)
                REQUESTS.labels("git", "held").inc()
                log.warning("push held", thread_id=grant.thread_id, change=change, paths=list(protected))
                detail = (
                    f"{hold.describe()}.\nHeld until this thread's owner approves this exact change "
                    f"({await handle(ctx)} approve, or the dashboard). Tell them, end your turn, and push the same "
                    "commits again after the approval; a different push is inspected anew."
                )
                return rejection(push, "held for the thread owner's approval (protected paths)", detail)
        return await forward(request, ctx.session, url, authorization=authorization, route="git", body=_read(sent))
    finally:
        for path in {*spooled} if spooled else ():
            with contextlib.suppress(OSError):
                await asyncio.to_thread(path.unlink)
