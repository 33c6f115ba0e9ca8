"""The warm pool's state in Redis, changed only by scripts, so that every step is atomic.

Three keys per pool (see :class:`drydock.infra.redis.Keys`), sharing one hash tag:

* ``entries``: id → ``{"state": "starting"|"idle", "at": epoch, "handle": record}``; its length
  is the pool's size, so :meth:`WarmPoolStore.reserve` can refuse to exceed it even when every
  worker replica refills at once;
* ``idle``: the ready ids in claim order;
* ``claims``: id → claim time, for ids taken out of the pool but not yet handed to a thread.

**Claim semantics.** :meth:`WarmPoolStore.claim` pops the first idle id and moves it from
``entries`` to ``claims`` in one script: a ready sandbox is in exactly one place at any
instant, and no two callers can receive the same id. The claimer then writes the sandbox's
record for its thread and calls :meth:`WarmPoolStore.complete`. A claim that is never completed
(its claimer died) is found by :meth:`stale_claims` and removed by :meth:`drop_claim`, which only
one caller can win.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from redis.asyncio import Redis

from drydock.infra.redis import Keys

STARTING = "starting"
IDLE = "idle"

_RESERVE = """
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""

_READY = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[1])
return 1
"""

_CLAIM = """
while true do
  local id = redis.call('LPOP', KEYS[2])
  if not id then return false end
  local entry = redis.call('HGET', KEYS[1], id)
  if entry then
    redis.call('HDEL', KEYS[1], id)
    redis.call('HSET', KEYS[3], id, ARGV[1])
    return {id, entry}
  end
end
"""

_RELEASE = """
redis.call('LREM', KEYS[2], 0, ARGV[1])
return redis.call('HDEL', KEYS[1], ARGV[1])
"""

_DROP_IF = """
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
"""

_SHRINK = """
if redis.call('HLEN', KEYS[1]) <= tonumber(ARGV[1]) then return false end
while true do
  local id = redis.call('LPOP', KEYS[2])
  if not id then return false end
  if redis.call('HDEL', KEYS[1], id) == 1 then return id end
end
"""


class WarmPoolStore:
    """The one place that reads and writes a warm pool's keys; see the module documentation."""

    def __init__(self, redis: Redis, keys: Keys, pool: str) -> None:
        self._redis = redis
        self._entries = keys.warm_pool_entries(pool)
        self._idle = keys.warm_pool_idle(pool)
        self._claims = keys.warm_pool_claims(pool)
        self._reserve = redis.register_script(_RESERVE)
        self._ready = redis.register_script(_READY)
        self._claim = redis.register_script(_CLAIM)
        self._release = redis.register_script(_RELEASE)
        self._drop_if = redis.register_script(_DROP_IF)
        self._shrink = redis.register_script(_SHRINK)

    async def reserve(self, sandbox_id: str, *, size: int, now: float) -> bool:
        """Count ``sandbox_id`` as starting, unless the pool already has ``size`` entries."""
        entry = json.dumps({"state": STARTING, "at": now})
        return bool(await self._reserve(keys=[self._entries], args=[sandbox_id, size, entry]))

    async def ready(self, sandbox_id: str, record: Mapping[str, str], *, now: float) -> bool:
        """Make a started sandbox claimable; ``False`` if its reservation was dropped meanwhile
        (the caller then deletes the sandbox)."""
        entry = json.dumps({"state": IDLE, "at": now, "handle": dict(record)})
        return bool(await self._ready(keys=[self._entries, self._idle], args=[sandbox_id, entry]))

    async def release(self, sandbox_id: str) -> bool:
        """Take ``sandbox_id`` out of the pool (a start that failed, a sandbox that is gone)."""
        return bool(await self._release(keys=[self._entries, self._idle], args=[sandbox_id]))

    async def claim(self, *, now: float) -> tuple[str, dict[str, str]] | None:
        """Atomically take the oldest idle sandbox: its id and record; ``None`` if none is idle."""
        found = await self._claim(keys=[self._entries, self._idle, self._claims], args=[now])
        if not found:
            return None
        sandbox_id, entry = cast(list[str], found)
        return sandbox_id, cast(dict[str, str], json.loads(entry)["handle"])

    async def complete(self, sandbox_id: str) -> None:
        """The claimed sandbox is handed over (or discarded): forget the claim."""
        await self._redis.hdel(self._claims, sandbox_id)

    async def shrink(self, size: int) -> str | None:
        """Take one idle sandbox out while the pool has more than ``size`` entries."""
        found = await self._shrink(keys=[self._entries, self._idle], args=[size])
        return cast(str, found) if found else None

    async def stale_starts(self, *, before: float) -> list[tuple[str, str]]:
        """Starting entries reserved before ``before`` (their starter died): ``(id, raw entry)``."""
        entries = cast(dict[str, str], await self._redis.hgetall(self._entries))
        stale = []
        for sandbox_id, raw in entries.items():
            entry: dict[str, Any] = json.loads(raw)
            if entry["state"] == STARTING and float(entry["at"]) < before:
                stale.append((sandbox_id, raw))
        return stale

    async def drop_start(self, sandbox_id: str, raw: str) -> bool:
        """Remove a stale starting entry if it is still exactly ``raw``; only one caller wins."""
        return bool(await self._drop_if(keys=[self._entries], args=[sandbox_id, raw]))

    async def stale_claims(self, *, before: float) -> list[tuple[str, str]]:
        """Claims made before ``before`` and never completed: ``(id, claim time)``."""
        claims = cast(dict[str, str], await self._redis.hgetall(self._claims))
        return [(sandbox_id, at) for sandbox_id, at in claims.items() if float(at) < before]

    async def drop_claim(self, sandbox_id: str, at: str) -> bool:
        """Remove a stale claim if it is still the one made at ``at``; only one caller wins."""
        return bool(await self._drop_if(keys=[self._claims], args=[sandbox_id, at]))

    async def members(self) -> set[str]:
        """Every id the pool holds: starting, idle or claimed."""
        entries = cast(list[str], await self._redis.hkeys(self._entries))
        claims = cast(list[str], await self._redis.hkeys(self._claims))
        return set(entries) | set(claims)

    async def idle_count(self) -> int:
        return int(await self._redis.llen(self._idle))
