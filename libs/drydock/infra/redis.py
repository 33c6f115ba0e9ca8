"""The Redis (or Valkey) connection and the one place where key names are spelled."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import RedisError

from drydock.config import RedisSettings


class StoreUnavailable(RuntimeError):
    """Redis cannot be reached."""


async def connect_redis(settings: RedisSettings, *, url: str | None = None) -> Redis:
    """A client with string responses, checked with a PING so a bad URL fails at start-up."""
    target = url or settings.url
    if target is None:
        raise StoreUnavailable("DRYDOCK_REDIS_URL is not set")
    client: Redis = Redis.from_url(target, decode_responses=True, socket_connect_timeout=2.0, health_check_interval=30)
    try:
        await client.ping()
    except (RedisError, OSError) as error:
        await client.aclose()
        raise StoreUnavailable(f"cannot reach Redis at {target}: {error}") from None
    return client


@dataclass(frozen=True)
class Keys:
    """Redis key names. Per-thread keys share the hash tag ``{thread_id}`` so that scripts
    touching several of them stay on one Redis Cluster slot."""

    prefix: str = "drydock"

    def thread(self, thread_id: str) -> str:
        return f"{self.prefix}:thread:{{{thread_id}}}"

    def lease(self, thread_id: str) -> str:
        return f"{self.prefix}:lease:{{{thread_id}}}"

    def lease_fence(self, thread_id: str) -> str:
        return f"{self.prefix}:lease-fence:{{{thread_id}}}"
