"""Dead letters: wakes that used up their deliveries, made visible instead of vanishing.

A wake becomes one when its handler fails on the consumer's last delivery, or when every
delivery ended without an answer (the worker died each time), which JetStream reports with its
MAX_DELIVERIES advisory. Burying one records it in Redis (the dashboard lists them for
administrators, who may retry), emits an error event on the thread, and posts a notice in the
thread's source conversation.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import cast

import structlog
from redis.asyncio import Redis

from drydock.bus import Bus, EventType, RunEvent, Wake
from drydock.channels.outbound import Outbound
from drydock.errors import describe
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.threads.metadata import ThreadMetadataStore
from drydock.worker import metrics

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class DeadLetter:
    id: str
    thread_id: str
    role: str
    deliveries: int
    error: str
    buried_at: str
    """ISO 8601, UTC."""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str) -> DeadLetter:
        return cls(**json.loads(raw))


class DeadLetters:
    """The dead-letter records: one hash entry per wake, by the wake's stream sequence."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys

    async def record(self, letter: DeadLetter) -> None:
        await self._redis.hset(self._keys.dead_letters(), letter.id, letter.to_json())

    async def all(self) -> list[DeadLetter]:
        """Every dead letter, most recent first."""
        raws = cast(dict[str, str], await self._redis.hgetall(self._keys.dead_letters()))
        return sorted((DeadLetter.from_json(raw) for raw in raws.values()), key=lambda d: d.buried_at, reverse=True)

    async def retry(self, letter_id: str, bus: Bus, *, subject: str | None = None) -> DeadLetter | None:
        """Wake the thread again (on its role's run subject unless ``subject`` names another) and
        forget the record; ``None`` if there is no such record."""
        raw = cast(str | None, await self._redis.hget(self._keys.dead_letters(), letter_id))
        if raw is None:
            return None
        letter = DeadLetter.from_json(raw)
        wake = Wake(thread_id=letter.thread_id, role=Role(letter.role), reason="retry")
        await (bus.publish(subject, wake) if subject is not None else bus.wake(wake))
        await self._redis.hdel(self._keys.dead_letters(), letter_id)
        return letter


class DeadLetterOffice:
    """Buries a wake: the record, the error event and the notice in the source conversation."""

    def __init__(self, bus: Bus, redis: Redis, keys: Keys, outbound: Outbound) -> None:
        self._bus = bus
        self._letters = DeadLetters(redis, keys)
        self._metadata = ThreadMetadataStore(redis, keys)
        self._outbound = outbound

    async def bury(self, wake: Wake, *, sequence: int, deliveries: int, error: str) -> DeadLetter:
        """Make the wake a visible dead letter. Each part is tried even when another fails."""
        letter = DeadLetter(
            id=f"{wake.role.value}-{sequence}",
            thread_id=wake.thread_id,
            role=wake.role.value,
            deliveries=deliveries,
            error=error,
            buried_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        log.error(
            "wake dead-lettered", thread_id=wake.thread_id, role=wake.role.value, deliveries=deliveries, error=error
        )
        metrics.DEAD_LETTERS.labels(wake.role.value).inc()
        try:
            await self._letters.record(letter)
        except Exception as failure:
            log.error("dead letter not recorded", thread_id=wake.thread_id, error=describe(failure))
        try:
            await self._bus.emit(
                RunEvent(
                    thread_id=wake.thread_id,
                    run_id=f"wake-{sequence}",
                    type=EventType.ERROR,
                    data={"error": error, "deliveries": deliveries, "gave_up": True, "dead_letter": letter.id},
                )
            )
        except Exception as failure:
            log.error("dead letter event not emitted", thread_id=wake.thread_id, error=describe(failure))
        try:
            await self._notify(wake.thread_id, deliveries, error)
        except Exception as failure:
            log.error("dead letter notice not posted", thread_id=wake.thread_id, error=describe(failure))
        return letter

    async def _notify(self, thread_id: str, deliveries: int, error: str) -> None:
        thread = await self._metadata.find(thread_id)
        address = thread.reply_to if thread is not None else None
        if address is None:
            return
        if not self._outbound.configured(address.channel):
            return
        await self._outbound.reply(
            address,
            f"I could not finish this after {deliveries} attempts; the last one ended with: {error}. "
            "An administrator can retry it from the Drydock dashboard.",
        )
