"""The store's epoch: proof that Redis still holds what Drydock wrote to it.

Provisioning at start-up (:func:`establish`) writes a random epoch to Redis and to a NATS
key-value bucket, the second witness. When Redis later lacks it, or holds another one, the store
was wiped or replaced (a restart without persistence, a new server): thread metadata, settings
and de-duplication keys are gone, and answering a delivery from that state would turn it into a
silent 2xx. Then every service reports not ready and the ingress answers 503, until an operator
restores the data or accepts the loss (``drydock provision --accept-store-loss``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import structlog
from nats.js import JetStreamContext
from nats.js.errors import BucketNotFoundError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue
from redis.asyncio import Redis

from drydock.infra.redis import Keys

log = structlog.get_logger(__name__)

BUCKET = "drydock_store"

RECOVERY = (
    "restore Redis from its backup (AOF or RDB) and restart, or accept the loss with "
    "`drydock provision --accept-store-loss`"
)


@dataclass
class StoreEpoch:
    """The epoch this process expects in Redis, and the check that it is still there."""

    redis: Redis
    keys: Keys
    expected: str
    witness: KeyValue | None = None
    """The bus's copy of the epoch, re-read when Redis disagrees: an operator who accepted a
    loss wrote a new epoch to both, and running processes follow it."""
    _reported: bool = field(default=False, repr=False)

    def lost(self, found: str | None) -> str | None:
        """Why the store does not hold this deployment's data, given the epoch read from it;
        ``None`` if it does. The first answer of a loss is logged, with how to recover."""
        if found == self.expected:
            self._reported = False
            return None
        if found is None:
            reason = f"the store lost its data (its epoch marker {self.keys.store_epoch()} is missing)"
        else:
            reason = f"the store was replaced (epoch {found}, expected {self.expected})"
        if not self._reported:
            self._reported = True
            log.error(f"store lost: {reason}; not ready until an operator recovers: {RECOVERY}")
        return reason

    async def confirm(self, found: str | None) -> str | None:
        """:meth:`lost`, after following an epoch the bus confirms (a loss an operator accepted)."""
        if (
            found != self.expected
            and found is not None
            and self.witness is not None
            and await _witnessed(self.witness, self.keys.prefix) == found
        ):
            log.warning("store epoch changed by an operator; following it", epoch=found, was=self.expected)
            self.expected = found
        return self.lost(found)

    async def check(self) -> str | None:
        """``None`` while Redis holds the expected epoch, else the reason (see :meth:`lost`)."""
        found = await self.redis.get(self.keys.store_epoch())
        return await self.confirm(None if found is None else str(found))


async def _bucket(js: JetStreamContext) -> KeyValue:
    try:
        return await js.key_value(BUCKET)
    except BucketNotFoundError:
        return await js.create_key_value(bucket=BUCKET, history=1, description="Drydock's store epoch")


async def _witnessed(kv: KeyValue, key: str) -> str | None:
    try:
        entry = await kv.get(key)
    except KeyNotFoundError:
        return None
    return entry.value.decode() if entry.value else None


async def establish(js: JetStreamContext, redis: Redis, keys: Keys, *, accept_loss: bool = False) -> StoreEpoch:
    """Read or write the epoch at start-up. A store and bus both without one are new and get a
    fresh epoch; a store that lost or changed its epoch keeps the bus's as the expected one, so
    the process reports the loss, unless ``accept_loss`` adopts the store as it is."""
    kv = await _bucket(js)
    witness_key = keys.prefix
    stored = await redis.get(keys.store_epoch())
    witnessed = await _witnessed(kv, witness_key)
    if witnessed is None:
        if stored is None:
            await redis.set(keys.store_epoch(), uuid.uuid4().hex, nx=True)
            stored = await redis.get(keys.store_epoch())
        try:
            await kv.create(witness_key, str(stored).encode())
            return StoreEpoch(redis, keys, str(stored), kv)
        except KeyWrongLastSequenceError:
            witnessed = await _witnessed(kv, witness_key) or str(stored)
    if stored != witnessed and accept_loss:
        adopted = str(stored or uuid.uuid4().hex)
        await redis.set(keys.store_epoch(), adopted)
        await kv.put(witness_key, adopted.encode())
        log.warning("store loss accepted: a new store epoch is written", epoch=adopted, lost=witnessed)
        return StoreEpoch(redis, keys, adopted, kv)
    expected = StoreEpoch(redis, keys, witnessed, kv)
    await expected.check()
    return expected
