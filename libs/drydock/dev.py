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

from redis.exceptions import RedisError

from drydock import services
from drydock.config import Settings
from drydock.errors import describe
from drydock.infra.embedded import embedded_infrastructure
from drydock.runtime import Runtime, open_runtime
from drydock.sandbox.providers.local import LocalProvider
from drydock.sandbox.records import SandboxRecords


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
        async with asyncio.TaskGroup() as group:
            for service in to_run:
                print(f"drydock dev: {service.name}: {service.listens(runtime)}", flush=True)
                group.create_task(service.run(runtime), name=service.name)
            print("drydock dev: ready; Ctrl-C stops everything", file=sys.stderr, flush=True)
