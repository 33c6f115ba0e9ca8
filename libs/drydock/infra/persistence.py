"""Whether Redis keeps its data across a restart (AOF or RDB snapshots), checked at start-up in
production: without it a restart loses every thread, setting and de-duplication key."""

from __future__ import annotations

from typing import cast

import structlog
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from drydock.config import Environment, Settings
from drydock.infra.redis import StoreUnavailable

log = structlog.get_logger(__name__)


async def persistence(redis: Redis) -> str | None:
    """How the server persists (``"aof"``, ``"rdb"``), ``None`` when it does not. Managed
    services that disable ``CONFIG`` are asked through ``INFO persistence``."""
    try:
        appendonly = cast(dict[str, str], await redis.config_get("appendonly")).get("appendonly", "")
        save = cast(dict[str, str], await redis.config_get("save")).get("save", "")
    except ResponseError:
        info = cast(dict[str, object], await redis.info("persistence"))
        if str(info.get("aof_enabled", "0")) == "1":
            return "aof"
        # Without CONFIG the save points are unknown: a server that has saved is taken to save.
        saved = int(str(info.get("rdb_saves", "0"))) > 0 and info.get("rdb_last_bgsave_status") == "ok"
        return "rdb" if saved else None
    if appendonly == "yes":
        return "aof"
    return "rdb" if save.strip() else None


async def require_persistence(redis: Redis, settings: Settings) -> None:
    """In production, raise :class:`StoreUnavailable` when Redis does not persist, unless
    ``DRYDOCK_REDIS_ACCEPT_EPHEMERAL`` says the operator accepts losing the store on a restart."""
    if settings.environment is not Environment.PRODUCTION:
        return
    if await persistence(redis) is not None:
        return
    if settings.redis.accept_ephemeral:
        log.warning("Redis does not persist (no AOF, no RDB saves); accepted by DRYDOCK_REDIS_ACCEPT_EPHEMERAL")
        return
    raise StoreUnavailable(
        "Redis does not persist (appendonly no, no save points): a restart would lose every thread and "
        "setting. Enable AOF (appendonly yes) or RDB saves, or set DRYDOCK_REDIS_ACCEPT_EPHEMERAL=true to accept that"
    )
