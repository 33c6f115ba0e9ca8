"""``drydock dev``: the full environment in one process.

NATS and Valkey are embedded when ``DRYDOCK_NATS_URL`` / ``DRYDOCK_REDIS_URL`` are unset;
every registered service that runs in development is started on the shared runtime. When it
exits (Ctrl-C, SIGTERM) it deletes the local sandboxes of its root: their daemons outlive the
process that started them, as pods would, and nothing else would stop them.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time

import httpx
from redis.exceptions import RedisError

from drydock import services
from drydock.config import Settings
from drydock.configuration_report import missing
from drydock.errors import describe
from drydock.infra.embedded import embedded_infrastructure
from drydock.runtime import Runtime, open_runtime
from drydock.sandbox.providers.local import LocalProvider
from drydock.sandbox.records import SandboxRecords
from drydock.telemetry.logging import summarize_configuration_gaps

READY_WITHIN = 180.0
"""How long the web server may take to answer ``/readyz`` (its imports are slow on a loaded machine)."""


async def stop_sandboxes(runtime: Runtime) -> None:
    """Delete every local sandbox of the configured root, recorded or not."""
    if runtime.settings.sandbox.provider != "local":
        return
    provider = LocalProvider(runtime.settings.sandbox, SandboxRecords(runtime.redis, runtime.keys))
    try:
        handles = await provider.list()
        for handle in handles:
            await provider.delete(handle.id)
    except (RedisError, OSError) as error:
        print(f"drydock dev: sandboxes not stopped: {describe(error)}", file=sys.stderr, flush=True)
        return
    finally:
        await provider.aclose()
    if handles:
        print(f"drydock dev: stopped {len(handles)} sandbox(es)", file=sys.stderr, flush=True)


async def web_ready(settings: Settings, within: float = READY_WITHIN) -> bool:
    """Whether the web server answered ``/readyz`` with 200 before the deadline."""
    host = settings.http.host if settings.http.host not in {"", "0.0.0.0", "::"} else "127.0.0.1"
    url = f"http://{'[' + host + ']' if ':' in host else host}:{settings.http.port}/readyz"
    deadline = time.monotonic() + within
    async with httpx.AsyncClient(timeout=5.0) as client:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(url)).status_code == 200:
                    return True
            await asyncio.sleep(0.1)
    return False


def print_gaps(settings: Settings) -> None:
    """One summary of what is not configured, instead of a notice per service."""
    gaps = missing(settings)
    if not gaps:
        return
    print("drydock dev: not configured yet (set these variables, or see `drydock config check`):", flush=True)
    for gap in gaps:
        print(f"drydock dev:   {gap}", flush=True)


async def run_dev(settings: Settings) -> None:
    need_nats, need_redis = settings.nats.url is None, settings.redis.url is None
    async with contextlib.AsyncExitStack() as stack:
        if need_nats or need_redis:
            urls = await stack.enter_async_context(embedded_infrastructure(nats=need_nats, redis=need_redis))
            settings = settings.model_copy(
                update={
                    "nats": settings.nats.model_copy(update={"url": settings.nats.url or urls.nats}),
                    "redis": settings.redis.model_copy(update={"url": settings.redis.url or urls.redis}),
                }
            )
        print(f"drydock dev: NATS {settings.nats.url}{' (embedded)' if need_nats else ''}", flush=True)
        print(f"drydock dev: Redis {settings.redis.url}{' (embedded)' if need_redis else ''}", flush=True)
        runtime = await stack.enter_async_context(open_runtime(settings, name="dev"))
        # Runs once the services have stopped, before the runtime closes.
        stack.push_async_callback(stop_sandboxes, runtime)
        to_run = [service for service in services.available().values() if service.in_dev]
        print_gaps(settings)
        summarize_configuration_gaps()
        async with asyncio.TaskGroup() as group:
            for service in to_run:
                print(f"drydock dev: {service.name}: {service.listens(runtime)}", flush=True)
                group.create_task(service.run(runtime), name=service.name)
            if settings.http.port == 0 or await web_ready(settings):
                print("drydock dev: ready; Ctrl-C stops everything", file=sys.stderr, flush=True)
            else:
                print(
                    f"drydock dev: the web server did not answer /readyz within {READY_WITHIN:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
