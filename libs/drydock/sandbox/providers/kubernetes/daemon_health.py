"""Asking a sandbox's daemon whether it answers: once, or until it does."""

from __future__ import annotations

import asyncio
import time

import httpx

from drydock.sandbox.daemon_http import daemon_client, health_status
from drydock.sandbox.errors import SandboxCreationFailed
from drydock.sandbox.handle import SandboxHandle


async def answers(handle: SandboxHandle, *, within: float) -> bool:
    """Whether the daemon answers health with 200 within ``within`` seconds."""
    async with daemon_client(handle) as client:
        try:
            return await health_status(client, within=within) == 200
        except (httpx.HTTPError, TimeoutError):
            return False


async def wait_answering(handle: SandboxHandle, *, within: float) -> None:
    """Poll health until the daemon answers 200; :class:`SandboxCreationFailed` after ``within`` seconds."""
    deadline = time.monotonic() + within
    last = "no answer yet"
    async with daemon_client(handle) as client:
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                status = await health_status(client, within=min(remaining, 2.0))
                if status == 200:
                    return
                last = f"health answered {status}"
            except (httpx.HTTPError, TimeoutError) as error:
                last = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            await asyncio.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
    raise SandboxCreationFailed(f"sandbox {handle.id}: daemon not ready within {within:g} s ({last})")
