"""Sandbox records in Redis: one hash per sandbox (its handle) and one index scored by last use.

The record is what lets another worker reconnect by id, and what the reaper walks. Writes
touch the record before the index and deletes the index before the record, so a reader that
finds an id in the index without a record simply skips it.

The daemon's token is never stored. It is derived as an HMAC of the sandbox id under the
server's key (:class:`~drydock.infra.server_keys.ServerKeys`, purpose ``daemon-token``), so any
worker holding ``DRYDOCK_CRYPTO_KEYS`` recomputes it and someone who reads Redis learns nothing
usable; the record names only which key made it (``token_key``), so a rotation keeps existing
sandboxes reachable while their key is still configured. Chosen over keeping tokens with the
provider (a file, a Secret) because it needs no extra read per reconnect and is the same for
every provider. Each record also carries a MAC over its fields (purpose ``sandbox-record``),
checked on every read: a record written or changed without the key (say, ``base_url`` pointed
elsewhere so that a worker sends the derived token there) is ignored.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any, cast

import structlog
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from drydock.infra.redis import Keys
from drydock.infra.server_keys import Purpose, ServerKeys
from drydock.sandbox.errors import SandboxNotFound
from drydock.sandbox.handle import SandboxHandle

log = structlog.get_logger(__name__)


class TokenNotDerived(ValueError):
    """A handle whose token is not the one derived from its id under a configured key."""


class SandboxStore:
    """The one place that reads and writes sandbox records (see the module docstring)."""

    def __init__(self, redis: Redis, keys: Keys, server_keys: ServerKeys) -> None:
        self._redis = redis
        self._keys = keys
        self._server_keys = server_keys

    def daemon_token(self, sandbox_id: str) -> str:
        """The token a new sandbox's daemon is started with, under the newest key."""
        token, _ = self._server_keys.derive(Purpose.DAEMON_TOKEN, sandbox_id)
        return token

    def seal(self, handle: SandboxHandle) -> dict[str, str]:
        """``handle`` as stored: its fields without the token, the token's key id and a MAC;
        :class:`TokenNotDerived` if its token is not :meth:`daemon_token`'s."""
        token_key = self._server_keys.identify(Purpose.DAEMON_TOKEN, handle.token, handle.id)
        if token_key is None:
            raise TokenNotDerived(f"sandbox {handle.id}'s token is not derived from its id under a configured key")
        record = handle.to_record() | {"token_key": token_key}
        record["mac"] = self._server_keys.sign(Purpose.SANDBOX_RECORD, json.dumps(record, sort_keys=True))
        return record

    def unseal(self, record: Mapping[str, str]) -> SandboxHandle | None:
        """The handle of a :meth:`seal`-ed record, its token derived again; ``None`` (and a
        warning) when the record fails its MAC. A token whose key is no longer configured is empty."""
        fields = {name: value for name, value in record.items() if name != "mac"}
        mac = record.get("mac")
        if mac is None or not self._server_keys.verify(Purpose.SANDBOX_RECORD, mac, json.dumps(fields, sort_keys=True)):
            log.warning("sandbox record fails its MAC; ignored", sandbox_id=record.get("id"))
            return None
        token = self._server_keys.rederive(Purpose.DAEMON_TOKEN, fields.get("token_key", ""), fields.get("id", ""))
        if token is None:
            log.warning("sandbox token's key is no longer configured", sandbox_id=fields.get("id"))
        return SandboxHandle.from_record(fields, token=token or "")

    @property
    def redis(self) -> Redis:
        """The connection, for a provider's own keys next to the records (the warm pool)."""
        return self._redis

    @property
    def keys(self) -> Keys:
        return self._keys

    async def put(self, handle: SandboxHandle) -> None:
        record = self.seal(handle)
        # The whole hash is replaced, so that no field of an earlier write survives outside the MAC.
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(self._keys.sandbox(handle.id))
            pipe.hset(self._keys.sandbox(handle.id), mapping=cast(dict[Any, str], record))
            await pipe.execute()
        await self._redis.zadd(self._keys.sandboxes(), {handle.id: time.time()})

    async def get(self, sandbox_id: str) -> SandboxHandle | None:
        record = cast(dict[str, str], await self._redis.hgetall(self._keys.sandbox(sandbox_id)))
        handle = self.unseal(record) if record else None
        # A valid record copied under another sandbox's key is not that sandbox's.
        return handle if handle is not None and handle.id == sandbox_id else None

    async def require(self, sandbox_id: str, *, provider: str, label: str, value: str, place: str) -> SandboxHandle:
        """The record of a sandbox of ``provider`` whose ``label`` is ``value`` (its host or
        namespace, named ``place`` in the error); :class:`SandboxNotFound` otherwise."""
        handle = await self.get(sandbox_id)
        if handle is None:
            raise SandboxNotFound(sandbox_id, "no record")
        if handle.provider != provider:
            raise SandboxNotFound(sandbox_id, f"it belongs to the {handle.provider} provider")
        if handle.labels.get(label) != value:
            raise SandboxNotFound(sandbox_id, f"it runs {place} {handle.labels.get(label)}")
        return handle

    async def remove(self, sandbox_id: str) -> None:
        await self._redis.zrem(self._keys.sandboxes(), sandbox_id)
        await self._redis.delete(self._keys.sandbox(sandbox_id))

    async def touch(self, sandbox_id: str, *, at: float | None = None) -> None:
        """Record a use of the sandbox now (or ``at``); a removed sandbox stays removed."""
        await self._redis.zadd(self._keys.sandboxes(), {sandbox_id: time.time() if at is None else at}, xx=True)

    def queue_touch(self, pipe: Pipeline, sandbox_id: str) -> None:
        """:meth:`touch` (now) in a caller's round trip."""
        pipe.zadd(self._keys.sandboxes(), {sandbox_id: time.time()}, xx=True)

    async def last_used(self, sandbox_id: str) -> float | None:
        score = await self._redis.zscore(self._keys.sandboxes(), sandbox_id)
        return None if score is None else float(score)

    async def all(self, *, provider: str | None = None) -> list[SandboxHandle]:
        """Every recorded sandbox (of ``provider``), oldest use first."""
        ids = cast(list[str], await self._redis.zrange(self._keys.sandboxes(), 0, -1))
        handles = []
        for sandbox_id in ids:
            handle = await self.get(sandbox_id)
            if handle is not None and (provider is None or handle.provider == provider):
                handles.append(handle)
        return handles

    async def idle_since(self, cutoff: float) -> list[str]:
        """Ids of sandboxes last used before ``cutoff`` (epoch seconds)."""
        return cast(list[str], await self._redis.zrangebyscore(self._keys.sandboxes(), "-inf", f"({cutoff}"))
