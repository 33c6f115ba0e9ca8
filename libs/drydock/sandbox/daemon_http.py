"""The HTTP clients a worker reaches a sandbox's daemon with.

A run's commands and file transfers go through an aiohttp session (:func:`daemon_session`):
it costs a third of httpx's CPU per request (0.28 against 0.85 ms per ``exec`` of ``true``,
measured), which was most of the exec round trip's overhead over a bare spawn. Waiting for a
new daemon to answer uses httpx (:func:`daemon_client`), on one shared TLS context: httpx builds
one for every client it creates, loading the whole trust store, about 40 ms of CPU and 670 KiB
each, measured, for a daemon spoken to in plain HTTP.
"""

from __future__ import annotations

import asyncio

import aiohttp
import httpx

from drydock.infra.tls import client_context
from drydock.sandbox.daemon import protocol
from drydock.sandbox.handle import SandboxHandle
from drydock.telemetry.tracing import aiohttp_tracing


def daemon_client(handle: SandboxHandle, *, timeout: httpx.Timeout | float | None = None) -> httpx.AsyncClient:
    """A client of ``handle``'s daemon, authenticated with its token (``timeout``: httpx's default if None)."""
    return httpx.AsyncClient(
        base_url=handle.base_url,
        headers={"Authorization": f"Bearer {handle.token}"},
        timeout=timeout if timeout is not None else httpx.Timeout(5.0),
        trust_env=False,
        verify=client_context(),
    )


async def health_status(client: httpx.AsyncClient, *, within: float) -> int:
    """The status the daemon's health answers with, within ``within`` seconds in all; its body is
    not read (whatever answers on the port may be the sandbox's code, sending without end)."""
    async with asyncio.timeout(within), client.stream("GET", protocol.HEALTH, timeout=within) as response:
        return response.status_code


def daemon_session(handle: SandboxHandle) -> aiohttp.ClientSession:
    """An aiohttp session with ``handle``'s daemon, authenticated with its token; make it inside
    the event loop that uses it, and close it."""
    # The daemon never compresses, and a compressed answer from whatever took over its port
    # would be inflated before the backend could count its bytes.
    return aiohttp.ClientSession(
        auto_decompress=False,
        base_url=handle.base_url,
        headers={"Authorization": f"Bearer {handle.token}"},
        connector=aiohttp.TCPConnector(ssl=client_context()),
        trace_configs=aiohttp_tracing(),
    )
