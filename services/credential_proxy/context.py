"""Everything a proxy request handler needs, built once at start-up and shared by both
listeners (reverse and egress)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import structlog
from aiohttp import web

from drydock.accounts import AccountsStore
from drydock.autofix.repairs import Repairs
from drydock.channels.outbound import Outbound
from drydock.credentials import GrantStore, ProxyCredentials
from drydock.credentials.allowlist import Allowlist
from drydock.infra.server_keys import ServerKeys
from drydock.runtime import Runtime
from drydock.threads.approvals import Approvals
from drydock.threads.metadata import ThreadMetadataStore
from services.credential_proxy.push_inspection import Mirrors

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class ProxyContext:
    runtime: Runtime
    grants: GrantStore
    credentials: ProxyCredentials
    session: aiohttp.ClientSession
    git_upstream: str
    api_upstream: str
    allowlist: Allowlist
    repairs: Repairs
    """Autofix repairs: a thread's pushes wait for its confidence while one is active."""
    accounts: AccountsStore
    """Repository settings and profiles: plan approval and protected paths."""
    metadata: ThreadMetadataStore
    approvals: Approvals
    """The owner's approvals of plans and held pushes."""
    mirrors: Mirrors
    mirror_root: Path
    """Where mirrors, quarantines and spooled push bodies live."""
    notices: Outbound | None
    """Posts a held push's notice in the thread's source channel."""


CONTEXT: web.AppKey[ProxyContext] = web.AppKey("context", ProxyContext)


@contextlib.asynccontextmanager
async def proxy_context(runtime: Runtime) -> AsyncIterator[ProxyContext]:
    """Open the upstream connection pool and the credential stores; close them on exit.
    :class:`~drydock.infra.server_keys.MissingServerKeys` without ``DRYDOCK_CRYPTO_KEYS``: no grant
    could be verified."""
    settings = runtime.settings
    server_keys = ServerKeys.from_settings(settings.crypto)
    allowlist = Allowlist(settings.proxy.egress_allowlist)
    # The keys were checked when the settings loaded and by ServerKeys: the cipher can be built.
    credentials = ProxyCredentials.create(settings, runtime.redis, runtime.keys)
    session = aiohttp.ClientSession(
        auto_decompress=False,
        skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=settings.proxy.upstream_timeout),
        connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=60),
    )
    git_upstream = (settings.proxy.git_upstream or f"https://{settings.github.host}").rstrip("/")
    # Without a configured directory each process keeps its own (mirrors are a cache), so two
    # proxies on one host never fetch into the same mirror at once.
    own_root = settings.proxy.mirror_dir is None
    mirror_root = Path(settings.proxy.mirror_dir or tempfile.mkdtemp(prefix="drydock-proxy-mirrors-"))
    notices = Outbound.from_settings(settings)
    try:
        yield ProxyContext(
            runtime=runtime,
            grants=credentials.grants,
            credentials=credentials,
            session=session,
            git_upstream=git_upstream,
            api_upstream=settings.github.api_url.rstrip("/"),
            allowlist=allowlist,
            repairs=Repairs(runtime.redis, runtime.keys),
            accounts=AccountsStore(runtime.redis, runtime.keys, host=settings.github.host),
            metadata=ThreadMetadataStore(runtime.redis, runtime.keys),
            approvals=Approvals(runtime.redis, runtime.keys, server_keys),
            mirrors=Mirrors(mirror_root, git_upstream),
            mirror_root=mirror_root,
            notices=notices,
        )
    finally:
        await notices.aclose()
        await session.close()
        if own_root:
            await asyncio.to_thread(shutil.rmtree, mirror_root, True)
        await credentials.aclose()
