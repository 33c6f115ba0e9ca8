"""Autofix's state in Redis: each thread's active repair (which is also the credential proxy's
push gate), the requests coalesced while it runs, and per pull request the repairs dispatched
and the head revisions already processed. Every key carries the thread's hash tag, so the
scripts below touch one Redis Cluster slot.

A repair is opened by one script that checks, in order, that no repair of the thread is active,
that this ``head:trigger`` was not processed, and that the loop limit is not reached, and then
records all three at once: two controllers (a deposed leader finishing its last event and its
successor) can never dispatch the same repair twice. The repair's key has a TTL
(``repair_timeout``), so a repair whose run never reported its end lifts its gate by itself.

While a repair exists, the thread's pushes need a confidence at or above the repair's threshold
(:attr:`Repair.push_allowed`): the coder reports it with ``report_confidence``, which also
*claims* the repair for its run. The first run ending after the claim ends the repair.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from drydock.autofix.policy import Kind, Signal, Source
from drydock.infra.redis import Keys

PullRef = tuple[str, str, int]
"""``(host, owner/name, number)``."""

HISTORY_TTL = timedelta(days=30)
"""How long a pull request's repair count and processed revisions outlive its last repair."""
CONFIDENCE_TTL = timedelta(days=7)

# KEYS: repair, pull, processed. ARGV: member, max repairs, repair ttl ms, history ttl s, then field/value pairs.
# Returns the new repair count, or -1 (a repair is active), -2 (processed), -3 (loop limit).
_OPEN = """
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
if redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1 then return -2 end
local count = tonumber(redis.call('HGET', KEYS[2], 'repairs') or '0')
if count >= tonumber(ARGV[2]) then return -3 end
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('EXPIRE', KEYS[3], ARGV[4])
redis.call('HINCRBY', KEYS[2], 'repairs', 1)
redis.call('EXPIRE', KEYS[2], ARGV[4])
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
redis.call('HSET', KEYS[1], 'attempt', count + 1)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return count + 1
"""

# KEYS: repair, pull, processed. ARGV: member. One reply for a pipeline: {active, processed, repairs}.
_STATE = """
return {
  redis.call('EXISTS', KEYS[1]), redis.call('SISMEMBER', KEYS[3], ARGV[1]), redis.call('HGET', KEYS[2], 'repairs')
}
"""

# KEYS: repair, pull, processed. ARGV: repair id, member.
_ABANDON = """
if redis.call('HGET', KEYS[1], 'id') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[3], ARGV[2])
redis.call('HINCRBY', KEYS[2], 'repairs', -1)
return 1
"""

# KEYS: repair, confidence of the run. ARGV: run id, confidence, diagnosis, now (iso), ttl s.
_REPORT = """
local repair_id = redis.call('HGET', KEYS[1], 'id') or ''
redis.call('HSET', KEYS[2], 'confidence', ARGV[2], 'diagnosis', ARGV[3], 'at', ARGV[4], 'repair', repair_id)
redis.call('EXPIRE', KEYS[2], ARGV[5])
if repair_id == '' then return {} end
redis.call('HSET', KEYS[1], 'confidence', ARGV[2], 'diagnosis', ARGV[3], 'run_id', ARGV[1], 'claimed_at', ARGV[4])
return redis.call('HGETALL', KEYS[1])
"""

# KEYS: repair. ARGV: repair id. Returns the ended repair's fields, or nothing.
_FINISH = """
if redis.call('HGET', KEYS[1], 'id') ~= ARGV[1] then return {} end
local fields = redis.call('HGETALL', KEYS[1])
redis.call('DEL', KEYS[1])
return fields
"""

# KEYS: pending. Returns the first field and value, removed.
_TAKE = """
local all = redis.call('HGETALL', KEYS[1])
if #all == 0 then return {} end
redis.call('HDEL', KEYS[1], all[1])
return {all[1], all[2]}
"""


def pull_field(pull: PullRef) -> str:
    host, repository, number = pull
    return f"{host.lower()}:{repository}#{number}"


def _pull_of(field_name: str) -> PullRef:
    host, _, rest = field_name.partition(":")
    repository, _, number = rest.rpartition("#")
    return host, repository, int(number)


def processed_member(head_sha: str, kind: Kind) -> str:
    return f"{head_sha}:{kind.value}"


@dataclass(frozen=True)
class Repair:
    """A repair dispatched to a thread, and the confidence its run reported."""

    id: str
    thread_id: str
    host: str
    repository: str
    number: int
    head_sha: str
    kind: Kind
    threshold: float
    dispatched_at: datetime
    attempt: int = 1
    run_id: str | None = None
    """The run that claimed it by reporting a confidence."""
    claimed_at: datetime | None = None
    confidence: float | None = None
    diagnosis: str = ""
    checks: tuple[str, ...] = field(default=())

    @property
    def pull(self) -> PullRef:
        return self.host, self.repository, self.number

    @property
    def push_allowed(self) -> bool:
        """Whether the thread may push: a confidence at or above the threshold was reported."""
        return self.confidence is not None and self.confidence >= self.threshold

    def to_hash(self) -> dict[str, str]:
        return {
            "id": self.id,
            "thread_id": self.thread_id,
            "host": self.host,
            "repository": self.repository,
            "number": str(self.number),
            "head_sha": self.head_sha,
            "kind": self.kind.value,
            "threshold": repr(self.threshold),
            "dispatched_at": self.dispatched_at.isoformat(),
            "attempt": str(self.attempt),
            "checks": json.dumps(list(self.checks)),
        }

    @classmethod
    def from_hash(cls, raw: dict[str, str]) -> Repair | None:
        if not raw.get("id"):
            return None
        return cls(
            id=raw["id"],
            thread_id=raw["thread_id"],
            host=raw["host"],
            repository=raw["repository"],
            number=int(raw["number"]),
            head_sha=raw["head_sha"],
            kind=Kind(raw["kind"]),
            threshold=float(raw["threshold"]),
            dispatched_at=datetime.fromisoformat(raw["dispatched_at"]),
            attempt=int(raw.get("attempt") or 1),
            run_id=raw.get("run_id") or None,
            claimed_at=datetime.fromisoformat(raw["claimed_at"]) if raw.get("claimed_at") else None,
            confidence=float(raw["confidence"]) if raw.get("confidence") else None,
            diagnosis=raw.get("diagnosis", ""),
            checks=tuple(json.loads(raw.get("checks") or "[]")),
        )


class OpenRefused(Exception):
    """The repair was not opened; ``reason`` names the rule a concurrent writer made true."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class PullState:
    """What autofix's own records say about one pull request of a thread."""

    repair_active: bool
    processed: bool
    repairs: int

    @classmethod
    def of(cls, reply: Any) -> PullState:
        """The state from the reply to :meth:`Repairs.queue_state`."""
        active, processed, repairs = reply
        return cls(bool(active), bool(processed), int(repairs or 0))


def _flat(raw: list[str]) -> dict[str, str]:
    return dict(zip(raw[::2], raw[1::2], strict=True))


def signal_json(signal: Signal) -> str:
    return json.dumps(
        {
            "kind": signal.kind.value,
            "head_sha": signal.head_sha,
            "delivery_id": signal.delivery_id,
            "checks": list(signal.checks),
            "actor": signal.actor,
            "url": signal.url,
        }
    )


def signal_from_json(raw: str) -> Signal:
    data = json.loads(raw)
    return Signal(
        kind=Kind(data["kind"]),
        head_sha=data["head_sha"],
        source=Source.PENDING,
        delivery_id=data["delivery_id"],
        checks=tuple(data.get("checks") or ()),
        actor=data.get("actor"),
        url=data.get("url") or "",
    )


class Repairs:
    """Autofix's records, per thread."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys
        self._open = redis.register_script(_OPEN)
        self._abandon = redis.register_script(_ABANDON)
        self._report = redis.register_script(_REPORT)
        self._finish = redis.register_script(_FINISH)
        self._take = redis.register_script(_TAKE)

    def _pull_keys(self, thread_id: str, pull: PullRef) -> list[str]:
        return [
            self._keys.autofix_repair(thread_id),
            self._keys.autofix_pull(thread_id, *pull),
            self._keys.autofix_processed(thread_id, *pull),
        ]

    async def state(self, thread_id: str, pull: PullRef, head_sha: str, kind: Kind) -> PullState:
        async with self._redis.pipeline(transaction=False) as pipe:
            self.queue_state(pipe, thread_id, pull, head_sha, kind)
            (reply,) = await pipe.execute()
        return PullState.of(reply)

    def queue_state(self, pipe: Pipeline, thread_id: str, pull: PullRef, head_sha: str, kind: Kind) -> None:
        """Queue :meth:`state`'s read, one reply that :meth:`PullState.of` decodes."""
        pipe.eval(_STATE, 3, *self._pull_keys(thread_id, pull), processed_member(head_sha, kind))

    async def open(self, repair: Repair, *, max_repairs: int, ttl: timedelta) -> int:
        """Record ``repair`` as the thread's active one; returns its attempt number for the pull
        request. Raises :class:`OpenRefused` when a repair is active, the revision was processed
        or the loop limit is reached (another writer got there first)."""
        fields = repair.to_hash()
        flat = [item for pair in fields.items() for item in pair]
        result = int(
            await self._open(
                keys=self._pull_keys(repair.thread_id, repair.pull),
                args=[
                    processed_member(repair.head_sha, repair.kind),
                    max_repairs,
                    int(ttl.total_seconds() * 1000),
                    int(HISTORY_TTL.total_seconds()),
                    *flat,
                ],
            )
        )
        if result > 0:
            return result
        raise OpenRefused({-1: "repair_active", -2: "already_processed", -3: "loop_limit"}[result])

    async def abandon(self, repair: Repair) -> bool:
        """Undo :meth:`open` after its message could not be delivered, so the repair is tried again."""
        member = processed_member(repair.head_sha, repair.kind)
        keys = self._pull_keys(repair.thread_id, repair.pull)
        return bool(await self._abandon(keys=keys, args=[repair.id, member]))

    async def active(self, thread_id: str) -> Repair | None:
        """The thread's active repair: what the credential proxy's push gate reads."""
        raw = cast(dict[str, str], await self._redis.hgetall(self._keys.autofix_repair(thread_id)))
        found = Repair.from_hash(raw)
        return found if found is not None and found.thread_id == thread_id else None

    async def report(self, thread_id: str, run_id: str, confidence: float, diagnosis: str) -> Repair | None:
        """Record a run's confidence; the active repair (if any) is claimed by the run and returned."""
        raw = await self._report(
            keys=[self._keys.autofix_repair(thread_id), self._keys.autofix_confidence(thread_id, run_id)],
            args=[
                run_id,
                repr(confidence),
                diagnosis,
                datetime.now(UTC).isoformat(),
                int(CONFIDENCE_TTL.total_seconds()),
            ],
        )
        return Repair.from_hash(_flat(cast(list[str], raw)))

    async def reported(self, thread_id: str, run_id: str) -> tuple[float, str] | None:
        """The confidence and diagnosis a run reported last, if it did."""
        raw = cast(dict[str, str], await self._redis.hgetall(self._keys.autofix_confidence(thread_id, run_id)))
        return (float(raw["confidence"]), raw.get("diagnosis", "")) if raw.get("confidence") else None

    async def finish(self, thread_id: str, repair_id: str) -> Repair | None:
        """End the repair if it is still the thread's active one; returns it as it ended."""
        raw = await self._finish(keys=[self._keys.autofix_repair(thread_id)], args=[repair_id])
        return Repair.from_hash(_flat(cast(list[str], raw)))

    async def hold(self, thread_id: str, pull: PullRef, signal: Signal) -> bool:
        """Keep ``signal`` as the pull request's pending request, replacing an older one; True
        unless the same request was pending already."""
        key, name, value = self._keys.autofix_pending(thread_id), pull_field(pull), signal_json(signal)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hget(key, name)
            pipe.hset(key, name, value)
            before, _ = await pipe.execute()
        return bool(before != value)

    async def take_pending(self, thread_id: str) -> tuple[PullRef, Signal] | None:
        """Remove and return one pending request of the thread."""
        raw = cast(list[str], await self._take(keys=[self._keys.autofix_pending(thread_id)]))
        if not raw:
            return None
        return _pull_of(raw[0]), signal_from_json(raw[1])

    async def pending(self, thread_id: str) -> dict[PullRef, Signal]:
        raw = cast(dict[str, str], await self._redis.hgetall(self._keys.autofix_pending(thread_id)))
        return {_pull_of(name): signal_from_json(value) for name, value in raw.items()}

    async def drop_pending(self, thread_id: str, pull: PullRef) -> None:
        await self._redis.hdel(self._keys.autofix_pending(thread_id), pull_field(pull))

    async def reset(self, thread_id: str, pull: PullRef) -> None:
        """Start the pull request's repair count over (a person turned autofix on again)."""
        await self._redis.delete(self._keys.autofix_pull(thread_id, *pull))

    async def claim_limit_notice(self, thread_id: str, pull: PullRef) -> bool:
        """True exactly once per pull request: whoever gets True posts the loop-limit notice."""
        key = self._keys.autofix_pull(thread_id, *pull)
        return bool(await self._redis.hsetnx(key, "limit_notified", "1"))

    async def release_limit_notice(self, thread_id: str, pull: PullRef) -> None:
        """The notice could not be posted: let the next decision try again."""
        await self._redis.hdel(self._keys.autofix_pull(thread_id, *pull), "limit_notified")
