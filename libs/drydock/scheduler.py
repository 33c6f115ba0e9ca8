"""Scheduled wake-ups: a thread asks to be woken later ("check CI again in ten minutes"); and
recurring schedules (:class:`Schedules`), such as the analyzer's continual refinement.

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
from redis.asyncio import Redis
from redis.exceptions import RedisError

from drydock.bus.client import Bus, BusUnavailable
from drydock.bus.envelopes import Author, Channel, InboxMessage, ReplyAddress
from drydock.errors import describe
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.threads.handoff import hand_off
from drydock.threads.metadata import ThreadMetadata, ThreadMetadataStore

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

    async def schedule(
        self, thread_id: str, role: Role, due_at: datetime, note: str, *, wakeup_id: str | None = None
    ) -> str:
        """Wake ``thread_id``'s ``role`` at ``due_at`` with ``note``; returns the wake-up's id
        (``wakeup_id`` when given, else a new one). Raises :class:`TooManyWakeups` when the
        thread has ``max_pending`` already."""
        wakeup = Wakeup(wakeup_id or uuid.uuid4().hex, thread_id, role, _aware(due_at), note, datetime.now(UTC))
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
            thread = await metadata.find(wakeup.thread_id)
            if thread is None:
                log.warning("wake-up for a thread without metadata dropped", thread_id=wakeup.thread_id, id=wakeup.id)
                await self._delete(wakeup)
                continue
            try:
                await hand_off(bus, metadata, wakeup.role, _message(wakeup, thread), reason=WAKE_REASON)
            except BusUnavailable as error:
                log.warning("wake-up not delivered; retried later", thread_id=wakeup.thread_id, error=describe(error))
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
                log.warning("wake-up scheduler cannot reach Redis", error=describe(error))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval)


def _reply_to(thread: ThreadMetadata) -> ReplyAddress:
    """Where the thread answers: its source conversation, as its metadata records it."""
    return thread.reply_to or ReplyAddress(channel=Channel.SCHEDULER)


def _message(wakeup: Wakeup, thread: ThreadMetadata) -> InboxMessage:
    return InboxMessage(
        delivery_id=f"wakeup-{wakeup.id}",
        thread_id=wakeup.thread_id,
        channel=Channel.SCHEDULER,
        author=Author(
            channel=Channel.SCHEDULER,
            external_id="scheduler",
            name="Drydock scheduler",
            user_id=thread.owner,
        ),
        text=f"Scheduled wake-up: {wakeup.note}",
        repository=thread.repository,
        references={"wakeup_id": wakeup.id, "scheduled_for": wakeup.due_at.isoformat()},
        reply_to=_reply_to(thread),
    )


# KEYS: due, entries. ARGV: id, first due score, body.
_ENSURE_SCHEDULE = """
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1
"""

# KEYS: due, entries. ARGV: now, visibility deadline, limit. Returns id, body, due, id, body, due, ...
_CLAIM_SCHEDULES = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[3]))
local claimed = {}
for i = 1, #due, 2 do
  local body = redis.call('HGET', KEYS[2], due[i])
  if body then
    redis.call('ZADD', KEYS[1], ARGV[2], due[i])
    table.insert(claimed, due[i])
    table.insert(claimed, body)
    table.insert(claimed, due[i + 1])
  else
    redis.call('ZREM', KEYS[1], due[i])
  end
end
return claimed
"""

# KEYS: due, entries. ARGV: id, next due score. A schedule cancelled meanwhile stays gone.
_RESCHEDULE = """
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1
"""


@dataclass(frozen=True)
class Schedule:
    """A recurring wake of a thread: every ``every``, its ``role`` gets ``Scheduled: <note>``."""

    id: str
    thread_id: str
    role: Role
    every: timedelta
    note: str
    references: dict[str, str]
    created_at: datetime

    def to_json(self) -> str:
        return json.dumps(
            {
                "thread_id": self.thread_id,
                "role": self.role.value,
                "every": self.every.total_seconds(),
                "note": self.note,
                "references": self.references,
                "created_at": self.created_at.isoformat(),
            }
        )

    @classmethod
    def from_json(cls, schedule_id: str, raw: str) -> Schedule:
        data = json.loads(raw)
        return cls(
            id=schedule_id,
            thread_id=data["thread_id"],
            role=Role(data["role"]),
            every=timedelta(seconds=float(data["every"])),
            note=data["note"],
            references=dict(data.get("references") or {}),
            created_at=datetime.fromisoformat(data["created_at"]),
        )


class Schedules:
    """Durable recurring schedules (the analyzer's continual refinement), shared by all replicas.

    A schedule is an entry in a Redis hash (by id, which names what it is for, so registering it
    again changes nothing) and in a sorted set scored by its next due time. Firing works as for
    :class:`Wakeups`: claiming hides a due entry until a visibility deadline, the thread gets the
    message (``Nats-Msg-Id`` ``schedule-{id}-{due}``, so a repeated delivery is stored once) and
    its wake, then the entry is moved to its next due time. Missed occurrences (the host was
    down) fire once, not once each.
    """

    def __init__(self, redis: Redis, keys: Keys, *, visibility: timedelta = CLAIM_VISIBILITY) -> None:
        self._redis = redis
        self._keys = keys
        self._visibility = visibility
        self._ensure = redis.register_script(_ENSURE_SCHEDULE)
        self._claim = redis.register_script(_CLAIM_SCHEDULES)
        self._reschedule = redis.register_script(_RESCHEDULE)

    async def ensure(
        self,
        schedule_id: str,
        thread_id: str,
        role: Role,
        every: timedelta,
        note: str,
        *,
        references: dict[str, str] | None = None,
        first_due: datetime | None = None,
    ) -> bool:
        """Register the schedule unless one with ``schedule_id`` exists; True if this call did.
        It first fires at ``first_due`` (default: one interval from now)."""
        if every <= timedelta(0):
            raise ValueError("a schedule's interval must be positive")
        now = datetime.now(UTC)
        schedule = Schedule(schedule_id, thread_id, role, every, note, dict(references or {}), now)
        due = _aware(first_due) if first_due is not None else now + every
        created = await self._ensure(
            keys=[self._keys.schedules_due(), self._keys.schedule_entries()],
            args=[schedule_id, repr(due.timestamp()), schedule.to_json()],
        )
        return bool(created)

    async def get(self, schedule_id: str) -> Schedule | None:
        raw = cast(str | None, await self._redis.hget(self._keys.schedule_entries(), schedule_id))
        return None if raw is None else Schedule.from_json(schedule_id, raw)

    async def next_due(self, schedule_id: str) -> datetime | None:
        score = await self._redis.zscore(self._keys.schedules_due(), schedule_id)
        return None if score is None else datetime.fromtimestamp(score, UTC)

    async def all(self) -> list[Schedule]:
        raws = cast(dict[str, str], await self._redis.hgetall(self._keys.schedule_entries()))
        return sorted((Schedule.from_json(key, raw) for key, raw in raws.items()), key=lambda item: item.id)

    async def cancel(self, schedule_id: str) -> bool:
        """Forget the schedule; False if there was none."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hdel(self._keys.schedule_entries(), schedule_id)
            pipe.zrem(self._keys.schedules_due(), schedule_id)
            removed, _ = await pipe.execute()
        return bool(removed)

    async def fire_due(self, bus: Bus, *, now: datetime | None = None, limit: int = 100) -> int:
        """Deliver the schedules due at ``now`` (default: the current time); returns how many."""
        moment = _aware(now or datetime.now(UTC))
        deadline = moment + self._visibility
        flat = cast(
            list[str],
            await self._claim(
                keys=[self._keys.schedules_due(), self._keys.schedule_entries()],
                args=[repr(moment.timestamp()), repr(deadline.timestamp()), limit],
            ),
        )
        metadata = ThreadMetadataStore(self._redis, self._keys)
        fired = 0
        for schedule_id, raw, score in zip(flat[::3], flat[1::3], flat[2::3], strict=True):
            schedule = Schedule.from_json(schedule_id, raw)
            due = datetime.fromtimestamp(float(score), UTC)
            thread = await metadata.find(schedule.thread_id)
            if thread is None:
                log.warning(
                    "schedule of a thread without metadata skipped", thread_id=schedule.thread_id, id=schedule_id
                )
            else:
                try:
                    await hand_off(bus, metadata, schedule.role, _scheduled(schedule, due, thread), reason="schedule")
                except BusUnavailable as error:
                    log.warning(
                        "schedule not delivered; retried later", thread_id=schedule.thread_id, error=describe(error)
                    )
                    break
                fired += 1
            following = due + schedule.every
            if following <= moment:
                following = moment + schedule.every
            await self._reschedule(
                keys=[self._keys.schedules_due(), self._keys.schedule_entries()],
                args=[schedule_id, repr(following.timestamp())],
            )
        return fired

    async def run_forever(self, bus: Bus, *, interval: float, stop: asyncio.Event, limit: int = 100) -> None:
        """Fire due schedules every ``interval`` seconds until ``stop`` is set (checked every
        iteration, as for :meth:`Wakeups.run_forever`)."""
        while not stop.is_set():
            try:
                while await self.fire_due(bus, limit=limit) == limit and not stop.is_set():
                    pass
            except (RedisError, OSError) as error:
                log.warning("schedules cannot reach Redis", error=describe(error))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval)


def _scheduled(schedule: Schedule, due: datetime, thread: ThreadMetadata) -> InboxMessage:
    return InboxMessage(
        delivery_id=f"schedule-{schedule.id}-{int(due.timestamp())}",
        thread_id=schedule.thread_id,
        channel=Channel.SCHEDULER,
        author=Author(channel=Channel.SCHEDULER, external_id="scheduler", name="Drydock scheduler"),
        text=f"Scheduled: {schedule.note}",
        repository=thread.repository,
        references={**schedule.references, "schedule_id": schedule.id, "scheduled_for": due.isoformat()},
        reply_to=_reply_to(thread),
    )
