"""Scheduled wake-ups: a thread asks to be woken later ("check CI again in ten minutes").

A wake-up is an entry in a Redis hash (by id) and in a sorted set scored by its due time (epoch
seconds), plus the thread's set of pending ids for :meth:`Wakeups.pending` and the per-thread cap.
:meth:`Wakeups.fire_due` delivers due entries to their thread's inbox and wakes the thread.

Delivery is at least once and duplicates are dropped downstream: claiming a due entry moves its
score to a visibility deadline (one script, so two replicas never claim the same entry at once),
and the entry is deleted only after its inbox message and wake were acknowledged. A replica
that fails or dies in between leaves the entry to be claimed again after the deadline; the
repeated message and wake carry the same ``Nats-Msg-Id`` (``wakeup-{id}``), so JetStream stores
them once within its duplicate window.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import cast

import structlog
from pydantic import ValidationError
from redis.asyncio import Redis
from redis.exceptions import RedisError

from drydock.bus.client import Bus, BusUnavailable
from drydock.bus.envelopes import Author, Channel, InboxMessage, ReplyAddress
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.threads.fields import OWNER, REPLY_TO, REPOSITORY
from drydock.threads.handoff import hand_off
from drydock.threads.metadata import ThreadMetadataStore

log = structlog.get_logger(__name__)

MAX_PENDING_PER_THREAD = 20
CLAIM_VISIBILITY = timedelta(seconds=60)
"""How long a claimed entry stays hidden from other replicas before it may be claimed again."""
WAKE_REASON = "wakeup"

# KEYS: due, entries, the thread's ids. ARGV: id, score, body, cap.
_SCHEDULE = """
if redis.call('SCARD', KEYS[3]) >= tonumber(ARGV[4]) then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
return 1
"""

# KEYS: due, entries. ARGV: now, visibility deadline, limit. Returns id, body, id, body, ...
_CLAIM = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local claimed = {}
for _, id in ipairs(ids) do
  local body = redis.call('HGET', KEYS[2], id)
  if body then
    redis.call('ZADD', KEYS[1], ARGV[2], id)
    table.insert(claimed, id)
    table.insert(claimed, body)
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return claimed
"""


class TooManyWakeups(ValueError):
    """The thread already has the most pending wake-ups it may have."""


@dataclass(frozen=True)
class Wakeup:
    id: str
    thread_id: str
    role: Role
    due_at: datetime
    note: str
    created_at: datetime

    def to_json(self) -> str:
        return json.dumps(
            {
                "thread_id": self.thread_id,
                "role": self.role.value,
                "due_at": self.due_at.isoformat(),
                "note": self.note,
                "created_at": self.created_at.isoformat(),
            }
        )

    @classmethod
    def from_json(cls, wakeup_id: str, raw: str) -> Wakeup:
        data = json.loads(raw)
        return cls(
            id=wakeup_id,
            thread_id=data["thread_id"],
            role=Role(data["role"]),
            due_at=datetime.fromisoformat(data["due_at"]),
            note=data["note"],
            created_at=datetime.fromisoformat(data["created_at"]),
        )


def _aware(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("a wake-up time needs a time zone")
    return moment.astimezone(UTC)


class Wakeups:
    """Pending wake-ups of every thread, shared by all replicas."""

    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        *,
        max_pending: int = MAX_PENDING_PER_THREAD,
        visibility: timedelta = CLAIM_VISIBILITY,
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._max_pending = max_pending
        self._visibility = visibility
        self._schedule = redis.register_script(_SCHEDULE)
        self._claim = redis.register_script(_CLAIM)

    async def schedule(self, thread_id: str, role: Role, due_at: datetime, note: str) -> str:
        """Wake ``thread_id``'s ``role`` at ``due_at`` with ``note``; returns the wake-up's id.
        Raises :class:`TooManyWakeups` when the thread has ``max_pending`` already."""
        wakeup = Wakeup(uuid.uuid4().hex, thread_id, role, _aware(due_at), note, datetime.now(UTC))
        scheduled = await self._schedule(
            keys=[self._keys.wakeups_due(), self._keys.wakeup_entries(), self._keys.thread_wakeups(thread_id)],
            args=[wakeup.id, repr(wakeup.due_at.timestamp()), wakeup.to_json(), self._max_pending],
        )
        if not scheduled:
            raise TooManyWakeups(f"the thread already has {self._max_pending} pending wake-ups, the most it may have")
        return wakeup.id

    async def get(self, wakeup_id: str) -> Wakeup | None:
        raw = cast(str | None, await self._redis.hget(self._keys.wakeup_entries(), wakeup_id))
        return None if raw is None else Wakeup.from_json(wakeup_id, raw)

    async def cancel(self, wakeup_id: str) -> bool:
        """Forget the wake-up; False if it is unknown (never scheduled, fired or cancelled)."""
        found = await self.get(wakeup_id)
        if found is None:
            return False
        await self._delete(found)
        return True

    async def pending(self, thread_id: str) -> list[Wakeup]:
        """The thread's wake-ups not yet delivered, soonest first."""
        ids = sorted(cast(set[str], await self._redis.smembers(self._keys.thread_wakeups(thread_id))))
        if not ids:
            return []
        raws = cast(list[str | None], await self._redis.hmget(self._keys.wakeup_entries(), ids))
        found = [Wakeup.from_json(wakeup_id, raw) for wakeup_id, raw in zip(ids, raws, strict=True) if raw]
        return sorted(found, key=lambda wakeup: (wakeup.due_at, wakeup.id))

    async def _delete(self, wakeup: Wakeup) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.zrem(self._keys.wakeups_due(), wakeup.id)
            pipe.hdel(self._keys.wakeup_entries(), wakeup.id)
            pipe.srem(self._keys.thread_wakeups(wakeup.thread_id), wakeup.id)
            await pipe.execute()

    async def claim_due(self, *, now: datetime, limit: int) -> list[Wakeup]:
        """Claim up to ``limit`` entries due at ``now``, hiding them from other claims until the
        visibility deadline."""
        deadline = now + self._visibility
        flat = cast(
            list[str],
            await self._claim(
                keys=[self._keys.wakeups_due(), self._keys.wakeup_entries()],
                args=[repr(now.timestamp()), repr(deadline.timestamp()), limit],
            ),
        )
        return [Wakeup.from_json(wakeup_id, raw) for wakeup_id, raw in zip(flat[::2], flat[1::2], strict=True)]

    async def fire_due(self, bus: Bus, *, now: datetime | None = None, limit: int = 100) -> int:
        """Deliver the wake-ups due at ``now`` (default: the current time); returns how many.

        An entry whose delivery fails stays claimed and is tried again after the visibility
        deadline; the rest of the batch then waits for the next call too, as the bus is down."""
        claimed = await self.claim_due(now=_aware(now or datetime.now(UTC)), limit=limit)
        metadata = ThreadMetadataStore(self._redis, self._keys)
        fired = 0
        for wakeup in claimed:
            fields = await metadata.find(wakeup.thread_id)
            if fields is None:
                log.warning("wake-up for a thread without metadata dropped", thread_id=wakeup.thread_id, id=wakeup.id)
                await self._delete(wakeup)
                continue
            try:
                await hand_off(bus, metadata, wakeup.role, _message(wakeup, fields), reason=WAKE_REASON)
            except BusUnavailable as error:
                log.warning("wake-up not delivered; retried later", thread_id=wakeup.thread_id, error=str(error))
                break
            await self._delete(wakeup)
            fired += 1
        return fired

    async def run_forever(self, bus: Bus, *, interval: float, stop: asyncio.Event, limit: int = 100) -> None:
        """Fire due wake-ups every ``interval`` seconds until ``stop`` is set.

        The stop flag is checked every iteration: redis-py can swallow a cancellation that lands
        mid-command (AGENTS.md), so cancelling the task alone may not end the loop."""
        while not stop.is_set():
            try:
                while await self.fire_due(bus, limit=limit) == limit and not stop.is_set():
                    pass
            except (RedisError, OSError) as error:
                log.warning("wake-up scheduler cannot reach Redis", error=str(error) or type(error).__name__)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval)


def _reply_to(wakeup: Wakeup, fields: dict[str, str]) -> ReplyAddress:
    """Where the thread answers: its source conversation, as its metadata records it."""
    raw = fields.get(REPLY_TO)
    if raw:
        try:
            return ReplyAddress.model_validate_json(raw)
        except ValidationError:
            log.warning("thread metadata holds an unreadable reply address", thread_id=wakeup.thread_id)
    return ReplyAddress(channel=Channel.SCHEDULER)


def _message(wakeup: Wakeup, fields: dict[str, str]) -> InboxMessage:
    reply_to = _reply_to(wakeup, fields)
    return InboxMessage(
        delivery_id=f"wakeup-{wakeup.id}",
        thread_id=wakeup.thread_id,
        channel=Channel.SCHEDULER,
        author=Author(
            channel=Channel.SCHEDULER,
            external_id="scheduler",
            name="Drydock scheduler",
            user_id=fields.get(OWNER) or None,
        ),
        text=f"Scheduled wake-up: {wakeup.note}",
        repository=fields.get(REPOSITORY) or None,
        references={"wakeup_id": wakeup.id, "scheduled_for": wakeup.due_at.isoformat()},
        reply_to=reply_to,
    )
