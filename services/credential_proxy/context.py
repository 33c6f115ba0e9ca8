"""Everything a proxy request handler needs, built once at start-up and shared by both
listeners (reverse and egress)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import structlog
from aiohttp import web

from drydock.autofix.repairs import Repairs
from drydock.credentials import CipherError, GrantStore, ProxyCredentials
from drydock.credentials.allowlist import Allowlist
from drydock.infra.server_keys import ServerKeys
from drydock.runtime import Runtime
from drydock.telemetry.logging import configuration_gap

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class ProxyContext:
    runtime: Runtime
    grants: GrantStore
    credentials: ProxyCredentials | None
    """``None`` when tokens cannot be stored (no encryption keys); ``disabled`` says why."""
    disabled: str | None
    session: aiohttp.ClientSession
    git_upstream: str
    api_upstream: str
    allowlist: Allowlist
    repairs: Repairs
    """Autofix repairs: a thread's pushes wait for its confidence while one is active."""


CONTEXT: web.AppKey[ProxyContext] = web.AppKey("context", ProxyContext)


@contextlib.asynccontextmanager
async def proxy_context(runtime: Runtime) -> AsyncIterator[ProxyContext]:
    """Open the upstream connection pool and the credential stores; close them on exit.
    :class:`~drydock.infra.server_keys.MissingServerKeys` without ``DRYDOCK_CRYPTO_KEYS``: no grant
    could be verified."""
    settings = runtime.settings
    server_keys = ServerKeys.from_settings(settings.crypto)
    allowlist = Allowlist(settings.proxy.egress_allowlist)
    credentials: ProxyCredentials | None = None
    disabled: str | None = None
    try:
        credentials = ProxyCredentials.create(settings, runtime.redis, runtime.keys)
    except CipherError as error:
        disabled = str(error)
        configuration_gap(log, logging.ERROR, "credential proxy cannot inject credentials", reason=disabled)
    session = aiohttp.ClientSession(
        auto_decompress=False,
        skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=settings.proxy.upstream_timeout),
        connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=60),
    )
    try:
        yield ProxyContext(
            runtime=runtime,
            grants=GrantStore(runtime.redis, runtime.keys, server_keys, retention=settings.proxy.grant_retention),
            credentials=credentials,
            disabled=disabled,
            session=session,
            git_upstream=(settings.proxy.git_upstream or f"https://{settings.github.host}").rstrip("/"),
            api_upstream=settings.github.api_url.rstrip("/"),
            allowlist=allowlist,
            repairs=Repairs(runtime.redis, runtime.keys),
        )
    finally:
        await session.close()
        if credentials is not None:
            await credentials.aclose()
