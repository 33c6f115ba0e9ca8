"""Thread metadata: one Redis hash per thread, changed only by compare-and-set, read as a
typed :class:`ThreadMetadata` parsed once.

Fields are strings; a structured value (the reply address) is JSON in its own field so that two
writers touching different fields never overwrite each other. ``kind`` is set when the thread is
created and never changes. Creating a thread also adds it to the thread index
(:mod:`drydock.threads.index`) in the same script, so no thread is unlisted; a state change moves
it between the index's state sets in the same script too. This module is the only one that
touches a thread's hash (``tests/test_store_keys.py`` checks it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, cast

import structlog
from pydantic import ValidationError
from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.exceptions import WatchError

from drydock.bus.envelopes import Channel, ReplyAddress
from drydock.errors import describe
from drydock.infra.compare_and_set import back_off
from drydock.infra.redis import Keys, Queue
from drydock.roles import Role
from drydock.threads.fields import (
    AUTHOR,
    CHANNEL,
    CREATED_AT,
    CREATED_BY,
    EFFORT,
    KIND,
    LAST_ACTIVITY,
    MODEL,
    OUTCOME,
    OWNER,
    REPLY_TO,
    REPOSITORY,
    SANDBOX_ID,
    STATE,
    TITLE,
    ThreadState,
)
from drydock.threads.index import FACETS, SEPARATOR, index_entry

log = structlog.get_logger(__name__)

# Looked up in dicts: calling an enum with a value costs more than the rest of a field's parse.
_ROLES = {role.value: role for role in Role}
_CHANNELS = {channel.value: channel for channel in Channel}
_STATES = {state.value: state for state in ThreadState}

Changes = Mapping[str, str | None]
"""Fields to set; ``None`` deletes the field."""

# KEYS: the thread's hash, then its index entry's keys (the facets hash, then its sets).
# ARGV: thread id, index score, facets value, then the fields.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
for i = 3, #KEYS do redis.call('ZADD', KEYS[i], ARGV[2], ARGV[1]) end
return 1
"""

_STATE_POSITION = FACETS.index(STATE) + 1

# KEYS: the thread's hash, the facets hash, then one set per state (in ThreadState order).
# ARGV: thread id, new state, the position of its set among KEYS, the last activity, the outcome
# ('' to keep it), then states not to replace.
_SET_STATE = f"""
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local current = redis.call('HGET', KEYS[1], '{STATE}')
for i = 6, #ARGV do
  if current == ARGV[i] then return 0 end
end
redis.call('HSET', KEYS[1], '{STATE}', ARGV[2], '{LAST_ACTIVITY}', ARGV[4])
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], '{OUTCOME}', ARGV[5]) end
local facets = redis.call('HGET', KEYS[2], ARGV[1])
if not facets then return 1 end
local parts, start = {{}}, 1
while true do
  local found = string.find(facets, '\\31', start, true)
  if not found then parts[#parts + 1] = string.sub(facets, start); break end
  parts[#parts + 1] = string.sub(facets, start, found - 1)
  start = found + 1
end
parts[{_STATE_POSITION}] = ARGV[2]
redis.call('HSET', KEYS[2], ARGV[1], table.concat(parts, '{SEPARATOR}'))
for i = 3, #KEYS do redis.call('ZREM', KEYS[i], ARGV[1]) end
redis.call('ZADD', KEYS[tonumber(ARGV[3])], parts[#parts], ARGV[1])
return 1
"""

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


class UnreadableMetadata(ValueError):
    """A thread's hash without a known ``kind``, or without a field its reader needs: nothing
    Drydock writes looks like that."""

    def __init__(self, thread_id: str, what: str) -> None:
        super().__init__(f"thread {thread_id} has unreadable metadata: {what}")
        self.thread_id = thread_id


class UpdateConflict(RuntimeError):
    """A compare-and-set update lost to concurrent writers more times than it may retry."""


def _text(fields: Mapping[str, str], name: str) -> str | None:
    return fields.get(name) or None


def _moment(fields: Mapping[str, str], name: str) -> datetime | None:
    raw = fields.get(name)
    try:
        return datetime.fromisoformat(raw) if raw else None
    except ValueError:
        return None


def _reply_to(thread_id: str, raw: str | None) -> ReplyAddress | None:
    if not raw:
        return None
    try:
        return ReplyAddress.model_validate_json(raw)
    except ValidationError:
        log.warning("thread metadata holds an unreadable reply address", thread_id=thread_id)
        return None


@dataclass(frozen=True)
class ThreadMetadata:
    """A thread's metadata, parsed once from its hash (:mod:`drydock.threads.fields` names the
    fields; the reply address is validated on first use, as a list of threads rarely needs it).
    An empty field reads as ``None``; so does a value that does not parse."""

    thread_id: str
    kind: Role
    channel: Channel | None = None
    raw_reply_to: str | None = field(default=None, repr=False)
    """The reply address as stored (JSON); read :attr:`reply_to`."""
    repository: str | None = None
    owner: str | None = None
    """The triggering Drydock user; ``None`` when the author is trusted through an organization."""
    author: str | None = None
    """The source account that started the thread, as ``channel:external id``."""
    sandbox_id: str | None = None
    """The thread's sandbox id, or the creation sentinel while one is being created."""
    created_at: datetime | None = None
    created_by: str | None = None
    model: str | None = None
    effort: str | None = None
    state: ThreadState | None = None
    last_activity: datetime | None = None
    outcome: str | None = None
    title: str | None = None

    @classmethod
    def parse(cls, thread_id: str, fields: Mapping[str, str]) -> ThreadMetadata:
        """The record of a thread's hash; :class:`UnreadableMetadata` without a known kind."""
        kind = _ROLES.get(fields.get(KIND, ""))
        if kind is None:
            raise UnreadableMetadata(thread_id, f"no known kind ({fields.get(KIND)!r})")
        return cls(
            thread_id=thread_id,
            kind=kind,
            channel=_CHANNELS.get(fields.get(CHANNEL, "")),
            raw_reply_to=fields.get(REPLY_TO),
            repository=_text(fields, REPOSITORY),
            owner=_text(fields, OWNER),
            author=_text(fields, AUTHOR),
            sandbox_id=_text(fields, SANDBOX_ID),
            created_at=_moment(fields, CREATED_AT),
            created_by=_text(fields, CREATED_BY),
            model=_text(fields, MODEL),
            effort=_text(fields, EFFORT),
            state=_STATES.get(fields.get(STATE, "")),
            last_activity=_moment(fields, LAST_ACTIVITY),
            outcome=_text(fields, OUTCOME),
            title=_text(fields, TITLE),
        )

    @classmethod
    def from_reply(cls, thread_id: str, reply: Any) -> ThreadMetadata | None:
        """The record from the reply to :meth:`ThreadMetadataStore.queue_find`; ``None`` for no thread."""
        fields = cast(dict[str, str], reply)
        return cls.parse(thread_id, fields) if fields else None

    @cached_property
    def reply_to(self) -> ReplyAddress | None:
        """Where the thread answers: its source conversation (parsed on first use, once)."""
        return _reply_to(self.thread_id, self.raw_reply_to)

    def require_reply_to(self) -> ReplyAddress:
        """The reply address, which every thread is created with; :class:`UnreadableMetadata`
        when it is missing or does not parse."""
        if self.reply_to is None:
            raise UnreadableMetadata(self.thread_id, "no readable reply address")
        return self.reply_to

    def is_owned_by(self, *, user_id: str | None, author: str | None = None) -> bool:
        """Whether a Drydock user (``user_id``) or a source account (``author``, ``channel:id``)
        owns the thread: its owner, or its author when it has no Drydock owner."""
        if self.owner:
            return user_id is not None and user_id == self.owner
        return author is not None and author == self.author


@dataclass(frozen=True)
class KnownThread:
    """What the ingress's routing reads of a thread in its one round trip: that it exists, its
    kind and its repository (:meth:`ThreadMetadataStore.queue_known`)."""

    kind: Role
    repository: str | None

    @classmethod
    def from_reply(cls, reply: Any) -> KnownThread | None:
        kind, repository = cast(list[str | None], reply)
        role = _ROLES.get(kind or "")
        return cls(role, repository or None) if role is not None else None


def _flatten(kind: Role, fields: Mapping[str, str]) -> list[str]:
    if KIND in fields:
        raise ValueError("kind is given separately")
    flat = [KIND, kind.value]
    for name, value in fields.items():
        flat += [name, value]
    return flat


class ThreadMetadataStore:
    """The one owner of the threads' hashes: every read and write of one goes through here."""

    def __init__(self, redis: Redis, keys: Keys, *, max_retries: int = 100) -> None:
        self._redis = redis
        self._keys = keys
        self._max_retries = max_retries
        self._create = redis.register_script(_CREATE)
        self._cas = redis.register_script(_COMPARE_AND_SET)
        self._set_state = redis.register_script(_SET_STATE)

    async def create(self, thread_id: str, *, kind: Role, fields: Mapping[str, str] | None = None) -> None:
        """Create the thread (and index it); raise :class:`ThreadExists` if it has metadata already."""
        fields = fields or {}
        entry = index_entry(self._keys, thread_id, {**fields, KIND: kind.value})
        created = await self._create(
            keys=[self._keys.thread(thread_id), *entry.keys],
            args=[thread_id, entry.score, entry.facets, *_flatten(kind, fields)],
        )
        if not created:
            raise ThreadExists(thread_id)

    def queue_create(self, pipe: Queue, thread_id: str, *, kind: Role, fields: Mapping[str, str] | None = None) -> None:
        """Queue :meth:`create`; its reply is 1 when it created the thread, 0 when it existed."""
        keys, args = self._creation(thread_id, kind, fields or {})
        pipe.eval(_CREATE, len(keys), *keys, *args)

    def _creation(self, thread_id: str, kind: Role, fields: Mapping[str, str]) -> tuple[list[str], list[str | int]]:
        flat = _flatten(kind, fields)
        entry = index_entry(self._keys, thread_id, {**fields, KIND: kind.value})
        return [self._keys.thread(thread_id), *entry.keys], [thread_id, entry.score, entry.facets, *flat]

    async def find(self, thread_id: str) -> ThreadMetadata | None:
        found = cast(dict[str, str], await self._redis.hgetall(self._keys.thread(thread_id)))
        return ThreadMetadata.parse(thread_id, found) if found else None

    async def get(self, thread_id: str) -> ThreadMetadata:
        found = await self.find(thread_id)
        if found is None:
            raise ThreadNotFound(thread_id)
        return found

    async def find_many(self, thread_ids: Iterable[str]) -> dict[str, ThreadMetadata]:
        """The threads of ``thread_ids`` that exist, read in one round trip. One whose metadata is
        unreadable is left out (and logged), so that one bad hash does not hide a whole list."""
        wanted = list(thread_ids)
        async with self._redis.pipeline(transaction=False) as pipe:
            for thread_id in wanted:
                pipe.hgetall(self._keys.thread(thread_id))
            replies: list[dict[str, str]] = await pipe.execute()
        found = {}
        for thread_id, fields in zip(wanted, replies, strict=True):
            if not fields:
                continue
            try:
                found[thread_id] = ThreadMetadata.parse(thread_id, fields)
            except UnreadableMetadata as error:
                log.warning("thread left out of a list", thread_id=thread_id, error=describe(error))
        return found

    def queue_find(self, pipe: Pipeline, thread_id: str) -> None:
        """Queue :meth:`find`'s read; :meth:`ThreadMetadata.from_reply` decodes its reply."""
        pipe.hgetall(self._keys.thread(thread_id))

    async def known(self, thread_id: str) -> KnownThread | None:
        """Whether the thread exists, with its kind and repository (:meth:`queue_known` alone)."""
        return KnownThread.from_reply(await self._redis.hmget(self._keys.thread(thread_id), [KIND, REPOSITORY]))

    def queue_known(self, pipe: Queue, thread_id: str) -> None:
        """Queue the read of whether the thread exists, with its kind and repository;
        :meth:`KnownThread.from_reply` decodes its reply."""
        pipe.hmget(self._keys.thread(thread_id), [KIND, REPOSITORY])

    async def state(self, thread_id: str) -> ThreadState | None:
        raw = cast(str | None, await self._redis.hget(self._keys.thread(thread_id), STATE))
        return _STATES.get(raw or "")

    async def scan(self, *, batch: int = 500) -> AsyncIterator[tuple[str, dict[str, str]]]:
        """Every thread's id and fields as stored, for indexing threads created before the index
        (:meth:`drydock.threads.index.ThreadIndex.backfill`)."""
        # thread("*") spells "…:thread:{*}"; the glob must leave the closing brace to the match.
        pattern = self._keys.thread("*").removesuffix("}")
        async for key in self._redis.scan_iter(match=pattern, count=batch):
            fields = cast(dict[str, str], await self._redis.hgetall(key))
            if fields:
                yield key[key.index("{") + 1 : key.rindex("}")], fields

    async def update(self, thread_id: str, change: Callable[[ThreadMetadata], Changes]) -> ThreadMetadata:
        """Apply ``change`` to the current metadata atomically, retrying when another writer won.

        ``change`` may run several times and must not have side effects. Returns the new metadata.
        """
        key = self._keys.thread(thread_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            for attempt in range(self._max_retries):
                try:
                    await pipe.watch(key)
                    current = cast(dict[str, str], await pipe.hgetall(key))
                    if not current:
                        raise ThreadNotFound(thread_id)
                    changes = change(ThreadMetadata.parse(thread_id, current))
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
                return ThreadMetadata.parse(thread_id, current | to_set)
        raise UpdateConflict(f"thread {thread_id}: update lost {self._max_retries} races in a row")

    async def set_reply_to(self, thread_id: str, address: ReplyAddress) -> None:
        """Replace the thread's reply address (a channel handed back a field to keep in it)."""
        await self.update(thread_id, lambda _thread: {REPLY_TO: address.model_dump_json()})

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

    async def set_state(
        self, thread_id: str, state: ThreadState, *, unless: Iterable[ThreadState], at: datetime, outcome: str
    ) -> bool:
        """Set the thread's state, last activity and (unless empty) outcome, and move it to the
        state's index set, unless its state is one of ``unless``; False if it was left (or the
        thread does not exist). :class:`drydock.threads.states.ThreadStates` says when."""
        states = list(ThreadState)
        written = await self._set_state(
            keys=[
                self._keys.thread(thread_id),
                self._keys.thread_facets(),
                *(self._keys.threads_by(STATE, value) for value in states),
            ],
            args=[
                thread_id,
                state.value,
                3 + states.index(state),
                at.isoformat(),
                outcome,
                *(value.value for value in unless),
            ],
        )
        return int(written) == 1
