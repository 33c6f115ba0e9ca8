"""``drydock dev``: the full environment in one process.

NATS and Valkey are embedded when ``DRYDOCK_NATS_URL`` / ``DRYDOCK_REDIS_URL`` are unset;
every registered service that runs in development is started on the shared runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

from drydock import services
from drydock.config import Settings
from drydock.infra.embedded import embedded_infrastructure
from drydock.runtime import open_runtime


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
        to_run = [service for service in services.available().values() if service.in_dev]
        async with asyncio.TaskGroup() as group:
            for service in to_run:
                print(f"drydock dev: {service.name}: {service.listens(runtime)}", flush=True)
                group.create_task(service.run(runtime), name=service.name)
            print("drydock dev: ready; Ctrl-C stops everything", file=sys.stderr, flush=True)
