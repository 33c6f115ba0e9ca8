"""The thread index: every thread in Redis sorted sets, for lists with filters and pagination
(the dashboard's; ``bench/bench_dashboard.py`` measures it at 10,000 threads).

What is stored, all under the hash tag ``{threads}``:

- one sorted set of every thread, scored by its creation time in epoch milliseconds;
- one sorted set per value of each facet (kind, channel, repository, owner, state), scored alike;
- the facets hash: thread id → its facet values and score, so that the query script filters
  candidates with one ``HGET`` each instead of reading every thread's own hash.

The entry is written by the same script that creates the thread's metadata
(:class:`~drydock.threads.metadata.ThreadMetadataStore`), so every creator (the ingress,
hand-offs, the dashboard) maintains it and no thread exists unindexed; the state facet changes
in the script that sets the thread's state (same store). Those scripts touch the thread's own hash and
the index keys, which lie in different hash slots: they need one Redis node (Drydock connects to
one; a Redis Cluster refuses them with ``CROSSSLOT`` rather than index inconsistently).

A query reads the smallest of the requested facet sets newest first (or, for a reader who may
see less than that, the union of their own threads and their repositories' threads) and checks
each candidate's facets against the other filters and the reader's visibility. A page ends
after ``limit`` matches, or after ``budget`` candidates so that an answer always comes in
bounded time; the cursor then points past the last candidate looked at and the page may be
short.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import AsyncIterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import cast

from redis.asyncio import Redis

from drydock.infra.redis import Keys
from drydock.threads.fields import CHANNEL, CREATED_AT, KIND, OWNER, REPOSITORY, STATE

FACETS: tuple[str, ...] = (KIND, CHANNEL, REPOSITORY, OWNER, STATE)
"""What a list can filter on, in the order the facets hash stores them (then the score)."""
SEPARATOR = "\x1f"
VISIBLE_SETS_LIMIT = 1000
"""Up to this many visible repositories, a restricted reader's list may scan the union of what
they may see (when that is smaller than the filters' sets); beyond, the filters' sets are scanned."""

# KEYS: facets hash, then the thread's sets. ARGV: thread id, score, facets value. Idempotent; an
# entry already there keeps its facets (its state may have changed since).
_ADD = """
redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[3])
for i = 2, #KEYS do redis.call('ZADD', KEYS[i], 'NX', ARGV[2], ARGV[1]) end
return 1
"""

# KEYS: facets hash, a scratch key, the candidate sets (the smallest drives), then for a
# restricted reader the sets of what they may see (their own threads, each visible repository).
# ARGV: cursor score ('' for none), cursor id, limit, budget, one wanted value per facet ('' for
# any), restricted flag, the reader's user id, the number of candidate sets, then the
# repositories the reader may see.
# Returns: next cursor score, next cursor id ('' when there is no more), then the thread ids.
_QUERY = """
local function split(text)
  local parts, start = {}, 1
  while true do
    local found = string.find(text, '\\31', start, true)
    if not found then parts[#parts + 1] = string.sub(text, start); return parts end
    parts[#parts + 1] = string.sub(text, start, found - 1)
    start = found + 1
  end
end
local required = tonumber(ARGV[12])
local driver, smallest = KEYS[3], redis.call('ZCARD', KEYS[3])
for i = 4, 2 + required do
  local size = redis.call('ZCARD', KEYS[i])
  if size < smallest then driver, smallest = KEYS[i], size end
end
if #KEYS > 2 + required then
  local visible_size = 0
  for i = 3 + required, #KEYS do visible_size = visible_size + redis.call('ZCARD', KEYS[i]) end
  if visible_size < smallest then
    -- What the reader may see is the smaller set: scan its union instead (deleted before returning).
    redis.call('ZUNIONSTORE', KEYS[2], #KEYS - 2 - required, unpack(KEYS, 3 + required))
    driver = KEYS[2]
  end
end
local has_cursor = ARGV[1] ~= ''
local cursor_score, cursor_id = tonumber(ARGV[1]), ARGV[2]
local limit, budget = tonumber(ARGV[3]), tonumber(ARGV[4])
local wanted = {ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9]}
local restricted, me = ARGV[10] == '1', ARGV[11]
local visible = {}
for i = 13, #ARGV do visible[ARGV[i]] = true end

local function scan()
  local found, scores = {}, {}
  local scanned, last_score, last_id = 0, nil, nil
  local max, offset = '+inf', 0
  if has_cursor then max = ARGV[1] end
  while true do
    local batch = redis.call('ZREVRANGEBYSCORE', driver, max, '-inf', 'WITHSCORES', 'LIMIT', offset, 256)
    if #batch == 0 then return {'', '', unpack(found)} end
    for i = 1, #batch, 2 do
      local id, score = batch[i], batch[i + 1]
      if not (has_cursor and tonumber(score) == cursor_score and id >= cursor_id) then
        if scanned == budget then return {last_score, last_id, unpack(found)} end
        scanned = scanned + 1
        local facets = redis.call('HGET', KEYS[1], id)
        if facets then
          local parts = split(facets)
          local ok = true
          for j = 1, 5 do
            if wanted[j] ~= '' and wanted[j] ~= parts[j] then ok = false; break end
          end
          if ok and restricted then
            ok = (me ~= '' and parts[4] == me) or (parts[3] ~= '' and visible[parts[3]] == true)
          end
          if ok then
            if #found == limit then
              return {scores[#found], found[#found], unpack(found)}
            end
            found[#found + 1] = id
            scores[#found] = score
          end
        end
        last_score, last_id = score, id
      end
    end
    local tail = batch[#batch]
    local same = 0
    for i = #batch, 2, -2 do
      if batch[i] == tail then same = same + 1 else break end
    end
    if max ~= '+inf' and tonumber(tail) == tonumber(max) then
      offset = offset + #batch / 2
    else
      max, offset = tail, same
    end
  end
end

local result = scan()
redis.call('DEL', KEYS[2])
return result
"""


def _score(fields: Mapping[str, str]) -> int:
    raw = fields.get(CREATED_AT)
    if raw:
        try:
            return int(datetime.fromisoformat(raw).timestamp() * 1000)
        except ValueError:
            pass
    return int(datetime.now(UTC).timestamp() * 1000)


def facet_values(fields: Mapping[str, str]) -> dict[str, str]:
    """The facets of a thread's metadata, as the index compares them (lower-cased)."""
    return {facet: (fields.get(facet) or "").lower() for facet in FACETS}


@dataclass(frozen=True)
class IndexEntry:
    """What a thread adds to the index: its sets (``keys``), score and facets value."""

    thread_id: str
    score: int
    facets: str
    keys: tuple[str, ...]
    """The facets hash first, then the index of all threads and the thread's facet sets."""


def index_entry(keys: Keys, thread_id: str, fields: Mapping[str, str]) -> IndexEntry:
    """The index entry of a thread with metadata ``fields`` (``kind`` included)."""
    values = facet_values(fields)
    score = _score(fields)
    sets = [keys.threads_index()] + [keys.threads_by(facet, value) for facet, value in values.items() if value]
    return IndexEntry(
        thread_id,
        score,
        SEPARATOR.join([*values.values(), str(score)]),
        (keys.thread_facets(), *sets),
    )


@dataclass(frozen=True)
class Visibility:
    """Whose threads a reader may see: their own, and those of the repositories listed."""

    user_id: str
    repositories: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ThreadQuery:
    """Filters (``None``: any) and a page of a thread list, newest first."""

    kind: str | None = None
    channel: str | None = None
    repository: str | None = None
    owner: str | None = None
    state: str | None = None
    visible_to: Visibility | None = None
    """``None``: every thread (an administrator)."""
    limit: int = 50
    cursor: str | None = None
    budget: int = 20_000
    """Candidates looked at per page at most."""

    def wanted(self) -> dict[str, str]:
        values = {KIND: self.kind, CHANNEL: self.channel, REPOSITORY: self.repository, OWNER: self.owner}
        return {facet: (values.get(facet) if facet != STATE else self.state) or "" for facet in FACETS}


@dataclass(frozen=True)
class ThreadPage:
    thread_ids: list[str] = field(default_factory=list)
    next_cursor: str | None = None
    """Pass it as :attr:`ThreadQuery.cursor` for the next page; ``None`` when there is none."""


class InvalidCursor(ValueError):
    """A cursor this index did not hand out."""


_SCORE = re.compile(r"-?[0-9]{1,19}")


def encode_cursor(score: str, thread_id: str) -> str:
    return base64.urlsafe_b64encode(f"{score}:{thread_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        score, thread_id = raw.split(":", 1)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidCursor("not a cursor this list handed out") from None
    # Scores are epoch milliseconds; anything else Python reads as a number (nan, 1_000, Arabic-Indic digits)
    # Redis refuses, which would look like an outage.
    if not thread_id or not _SCORE.fullmatch(score):
        raise InvalidCursor("not a cursor this list handed out")
    return score, thread_id


class ThreadIndex:
    """Lists threads by their facets; see the module docstring."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys
        self._add = redis.register_script(_ADD)
        self._query = redis.register_script(_QUERY)

    async def add(self, thread_id: str, fields: Mapping[str, str]) -> None:
        """Index a thread that exists already (idempotent; the metadata store indexes new ones)."""
        entry = index_entry(self._keys, thread_id, fields)
        await self._add(keys=list(entry.keys), args=[thread_id, entry.score, entry.facets])

    async def list(self, query: ThreadQuery) -> ThreadPage:
        """One page of the threads matching ``query``, newest first. Raises :class:`InvalidCursor`."""
        if query.limit < 1:
            raise ValueError("limit must be at least 1")
        wanted = query.wanted()
        sets = [self._keys.threads_by(facet, value) for facet, value in wanted.items() if value]
        sets = sets or [self._keys.threads_index()]
        score, cursor_id = decode_cursor(query.cursor) if query.cursor else ("", "")
        visible = query.visible_to
        repositories = sorted(name.lower() for name in visible.repositories) if visible is not None else []
        if visible is not None and query.repository and query.repository.lower() not in repositories:
            # Of a repository the reader may not see, only their own threads: scanning the
            # reader's set instead of the repository's is the difference between a handful of
            # candidates and every thread of that repository.
            sets.append(self._keys.threads_by(OWNER, visible.user_id))
        reach = []
        if visible is not None and len(repositories) <= VISIBLE_SETS_LIMIT:
            reach = [self._keys.threads_by(OWNER, visible.user_id)]
            reach += [self._keys.threads_by(REPOSITORY, name) for name in repositories]
        reply = cast(
            list[str],
            await self._query(
                keys=[self._keys.thread_facets(), self._keys.thread_scratch(), *sets, *reach],
                args=[
                    score,
                    cursor_id,
                    query.limit,
                    query.budget,
                    *(wanted[facet].lower() for facet in FACETS),
                    "1" if visible is not None else "0",
                    (visible.user_id.lower() if visible is not None else ""),
                    len(sets),
                    *repositories,
                ],
            ),
        )
        next_score, next_id, *ids = reply
        return ThreadPage(list(ids), encode_cursor(next_score, next_id) if next_id else None)

    async def count(self) -> int:
        """How many threads are indexed."""
        return int(await self._redis.zcard(self._keys.threads_index()))

    async def backfill(self, threads: AsyncIterable[tuple[str, Mapping[str, str]]]) -> int:
        """Index every thread created before the index existed, once per installation (a marker
        remembers it); ``threads`` is :meth:`~drydock.threads.metadata.ThreadMetadataStore.scan`,
        read only when the marker is absent. Returns how many threads were looked at."""
        if await self._redis.exists(self._keys.threads_indexed()):
            return 0
        seen = 0
        async for thread_id, fields in threads:
            if KIND not in fields:
                continue
            await self.add(thread_id, fields)
            seen += 1
        await self._redis.set(self._keys.threads_indexed(), datetime.now(UTC).isoformat(), nx=True)
        return seen
