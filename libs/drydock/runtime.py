"""What a running service is given: settings and live connections to NATS and Redis."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from nats.aio.client import Client as NatsClient
from redis.asyncio import Redis

from drydock.bus import Bus, connect_nats, provision, topology
from drydock.config import Settings
from drydock.infra.redis import Keys, connect_redis


@dataclass(frozen=True)
class Runtime:
    settings: Settings
    nats: NatsClient
    bus: Bus
    redis: Redis
    keys: Keys


@contextlib.asynccontextmanager
async def open_runtime(settings: Settings, *, name: str) -> AsyncIterator[Runtime]:
    """Connect to NATS and Redis, provision the streams (unless ``DRYDOCK_NATS_PROVISION`` is
    off), and close both on exit.

    Raises :class:`drydock.bus.BusUnavailable` or :class:`drydock.infra.redis.StoreUnavailable`
    naming the server that cannot be reached.
    """
    nc = await connect_nats(settings.nats, name=f"drydock-{name}")
    try:
        redis = await connect_redis(settings.redis)
        try:
            bus = Bus(nc)
            if settings.nats.provision:
                await provision(bus.js, topology(settings.nats, settings.snapshots))
            yield Runtime(settings, nc, bus, redis, Keys(settings.redis.key_prefix))
        finally:
            await redis.aclose()
    finally:
        await nc.close()
