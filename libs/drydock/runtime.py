"""What a running service is given: settings and live connections to NATS and Redis."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from nats.aio.client import Client as NatsClient
from redis.asyncio import Redis

from drydock.bus import Bus, connect_nats, provision, topology
from drydock.config import Settings
from drydock.infra.persistence import require_persistence
from drydock.infra.redis import Keys, connect_redis
from drydock.infra.store_epoch import StoreEpoch, establish


@dataclass(frozen=True)
class Runtime:
    settings: Settings
    nats: NatsClient
    bus: Bus
    redis: Redis
    keys: Keys
    store: StoreEpoch | None = None
    """The store epoch this process expects; set by :func:`open_runtime`."""


@contextlib.asynccontextmanager
async def open_runtime(settings: Settings, *, name: str, accept_store_loss: bool = False) -> AsyncIterator[Runtime]:
    """Connect to NATS and Redis, provision the streams (unless ``DRYDOCK_NATS_PROVISION`` is
    off) and the store epoch, and close both on exit.

    Raises :class:`drydock.bus.BusUnavailable` or :class:`drydock.infra.redis.StoreUnavailable`
    naming the server that cannot be reached, or that does not persist in production.
    ``accept_store_loss`` adopts a store that lost its data (see :mod:`drydock.infra.store_epoch`).
    """
    nc = await connect_nats(settings.nats, name=f"drydock-{name}")
    try:
        redis = await connect_redis(settings.redis)
        try:
            await require_persistence(redis, settings)
            bus = Bus(nc)
            if settings.nats.provision:
                await provision(bus.js, topology(settings.nats, settings.snapshots))
            keys = Keys(settings.redis.key_prefix)
            store = await establish(bus.js, redis, keys, accept_loss=accept_store_loss)
            yield Runtime(settings, nc, bus, redis, keys, store)
        finally:
            await redis.aclose()
    finally:
        await nc.close()
