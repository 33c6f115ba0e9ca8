"""Thread metadata: one Redis hash per thread, changed only by compare-and-set.

Fields are strings; structured values (reply address, PR records, model settings) are JSON in
their own field so that two writers touching different fields never overwrite each other.
``kind`` is set when the thread is created and never changes. Creating a thread also adds it to
the thread index (:mod:`drydock.threads.index`) in the same script, so no thread is unlisted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from redis.asyncio import Redis
from redis.exceptions import WatchError

from drydock.infra.compare_and_set import back_off
from drydock.infra.redis import Keys, Queue
from drydock.roles import Role
from drydock.threads.fields import KIND
from drydock.threads.index import index_entry

Changes = Mapping[str, str | None]
"""Fields to set; ``None`` deletes the field."""

# KEYS: the thread's hash, then its index entry's keys (the facets hash, then its sets).
# ARGV: thread id, index score, facets value, then the fields.
_INDEX = """
local function index()
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
  for i = 3, #KEYS do redis.call('ZADD', KEYS[i], ARGV[2], ARGV[1]) end
end
"""

_CREATE = (
    _INDEX
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
index()
return 1
"""
)

_ENSURE = (
    _INDEX
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], unpack(ARGV, 4))
  index()
end
return redis.call('HGETALL', KEYS[1])
"""
)

# ARGV: field, expected-present flag ("1"/"0"), expected value, new-present flag, new value.
_COMPARE_AND_SET = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local current = redis.call('HGET', KEYS[1], ARGV[1])
if ARGV[2] == '1' then
  if current ~= ARGV[3] then return 0 end
elseif current then
  return 0
end
if ARGV[4] == '1' then redis.call('HSET', KEYS[1], ARGV[1], ARGV[5]) else redis.call('HDEL', KEYS[1], ARGV[1]) end
return 1
"""


class ThreadNotFound(LookupError):
    def __init__(self, thread_id: str) -> None:
        super().__init__(f"thread {thread_id} has no metadata")
        self.thread_id = thread_id


class ThreadExists(RuntimeError):
    def __init__(self, thread_id: str) -> None:
        super().__init__(f"thread {thread_id} already exists")
        self.thread_id = thread_id


class UpdateConflict(RuntimeError):
    """A compare-and-set update lost to concurrent writers more times than it may retry."""


def _flatten(kind: Role, fields: Mapping[str, str]) -> list[str]:
    if KIND in fields:
        raise ValueError("kind is given separately")
    flat = [KIND, kind.value]
    for name, value in fields.items():
        flat += [name, value]
    return flat


class ThreadMetadataStore:
    def __init__(self, redis: Redis, keys: Keys, *, max_retries: int = 100) -> None:
        self._redis = redis
        self._keys = keys
        self._max_retries = max_retries
        self._create = redis.register_script(_CREATE)
        self._ensure = redis.register_script(_ENSURE)
        self._cas = redis.register_script(_COMPARE_AND_SET)

    async def create(self, thread_id: str, *, kind: Role, fields: Mapping[str, str] | None = None) -> None:
        """Create the thread (and index it); raise :class:`ThreadExists` if it has metadata already."""
        keys, args = self._creation(thread_id, kind, fields or {})
        created = await self._create(keys=keys, args=args)
        if not created:
            raise ThreadExists(thread_id)

    def queue_create(self, pipe: Queue, thread_id: str, *, kind: Role, fields: Mapping[str, str] | None = None) -> None:
        """Queue :meth:`create`; its reply is 1 when it created the thread, 0 when it existed."""
        keys, args = self._creation(thread_id, kind, fields or {})
        pipe.eval(_CREATE, len(keys), *keys, *args)

    async def ensure(self, thread_id: str, *, kind: Role, fields: Mapping[str, str] | None = None) -> dict[str, str]:
        """Create the thread (and index it) unless it exists; return its metadata either way."""
        keys, args = self._creation(thread_id, kind, fields or {})
        flat = await self._ensure(keys=keys, args=args)
        return dict(zip(flat[::2], flat[1::2], strict=True))

    def _creation(self, thread_id: str, kind: Role, fields: Mapping[str, str]) -> tuple[list[str], list[str | int]]:
        flat = _flatten(kind, fields)
        entry = index_entry(self._keys, thread_id, {**fields, KIND: kind.value})
        return [self._keys.thread(thread_id), *entry.keys], [thread_id, entry.score, entry.facets, *flat]

    async def find(self, thread_id: str) -> dict[str, str] | None:
        found = cast(dict[str, str], await self._redis.hgetall(self._keys.thread(thread_id)))
        return found or None

    async def get(self, thread_id: str) -> dict[str, str]:
        found = await self.find(thread_id)
        if found is None:
            raise ThreadNotFound(thread_id)
        return found

    async def kind(self, thread_id: str) -> Role:
        return Role((await self.get(thread_id))[KIND])

    async def update(self, thread_id: str, change: Callable[[dict[str, str]], Changes]) -> dict[str, str]:
        """Apply ``change`` to the current fields atomically, retrying when another writer won.

        ``change`` may run several times and must not have side effects. Returns the new fields.
        """
        key = self._keys.thread(thread_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            for attempt in range(self._max_retries):
                try:
                    await pipe.watch(key)
                    current = cast(dict[str, str], await pipe.hgetall(key))
                    if not current:
                        raise ThreadNotFound(thread_id)
                    changes = change(dict(current))
                    if KIND in changes and changes[KIND] != current[KIND]:
                        raise ValueError("a thread's kind never changes")
                    to_set: dict[Any, str] = {name: value for name, value in changes.items() if value is not None}
                    to_delete = [name for name, value in changes.items() if value is None]
                    pipe.multi()
                    if to_set:
                        pipe.hset(key, mapping=to_set)
                    if to_delete:
                        pipe.hdel(key, *to_delete)
                    await pipe.execute()
                except WatchError:
                    await back_off(pipe, attempt)
                    continue
                for name in to_delete:
                    current.pop(name, None)
                return current | to_set
        raise UpdateConflict(f"thread {thread_id}: update lost {self._max_retries} races in a row")

    async def compare_and_set(self, thread_id: str, field: str, *, expected: str | None, new: str | None) -> bool:
        """Set (or with ``new=None`` delete) ``field`` only if it currently equals ``expected``
        (``None``: only if it is absent). True if it was written."""
        if field == KIND:
            raise ValueError("a thread's kind never changes")
        result = await self._cas(
            keys=[self._keys.thread(thread_id)],
            args=[field, "0" if expected is None else "1", expected or "", "0" if new is None else "1", new or ""],
        )
        if result == -1:
            raise ThreadNotFound(thread_id)
        return bool(result)
