"""LangGraph checkpoints in Redis or Valkey, through ``langgraph-checkpoint-plainredis``
(pinned; it needs no Redis modules). LangGraph's conformance suite runs against it in
``tests/checkpoints``.

The saver spells its own keys under :meth:`drydock.infra.redis.Keys.checkpoints`:
``{prefix}:cp:{thread_id}:{ns}:{id}`` (a checkpoint), ``…:blob:…`` (channel values),
``…:wr:…`` (pending writes), ``…:idx:{thread_id}:{ns}`` (the thread's timeline), plus one
``…:threads`` registry and one ``…:seq`` counter. Its keys carry no hash tag, so it runs on a
single Redis (or a replicated one), not on Redis Cluster.

It talks binary: it gets a client of its own (``decode_responses=False``) rather than the
runtime's string client.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta

from langgraph_checkpoint_plainredis import AsyncRedisSaver
from redis.asyncio import Redis
from redis.exceptions import RedisError

from drydock.config import RedisSettings
from drydock.infra.redis import Keys, StoreUnavailable, redis_client


def build_checkpointer(client: Redis, keys: Keys, *, ttl: timedelta | None = None) -> AsyncRedisSaver:
    """The async checkpointer on ``client`` (which must return bytes), under ``keys``' prefix.

    ``ttl`` expires a thread's checkpoints that long after their last write; ``None`` keeps
    them until the thread is deleted.
    """
    if client.get_encoder().decode_responses:
        raise ValueError("the checkpointer needs a Redis client with decode_responses=False")
    seconds = int(ttl.total_seconds()) if ttl is not None else None
    return AsyncRedisSaver(client, prefix=keys.checkpoints(), ttl=seconds)


@contextlib.asynccontextmanager
async def open_checkpointer(
    settings: RedisSettings, *, ttl: timedelta | None = None, url: str | None = None
) -> AsyncIterator[AsyncRedisSaver]:
    """Connect a binary client (checked with a PING), yield the checkpointer, close the client.

    Raises :class:`~drydock.infra.redis.StoreUnavailable` naming the server that cannot be reached.
    """
    target = url or settings.url
    if target is None:
        raise StoreUnavailable("DRYDOCK_REDIS_URL is not set")
    client = redis_client(settings, target, decode_responses=False)
    try:
        try:
            await client.ping()
        except (RedisError, OSError) as error:
            raise StoreUnavailable(f"cannot reach Redis at {target}: {error}") from None
        yield build_checkpointer(client, Keys(settings.key_prefix), ttl=ttl)
    finally:
        await client.aclose()
