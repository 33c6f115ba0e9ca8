"""LangGraph checkpoints in Redis or Valkey, through ``langgraph-checkpoint-plainredis``
(pinned; it needs no Redis modules). LangGraph's conformance suite runs against it in
``tests/checkpoints``.

The saver spells its own keys under :meth:`drydock.infra.redis.Keys.checkpoints`:
``{prefix}:cp:{thread_id}:{ns}:{id}`` (a checkpoint), ``…:blob:…`` (channel values),
``…:wr:…`` (pending writes), ``…:idx:{thread_id}:{ns}`` (the thread's timeline),
``…:namespaces:{thread_id}`` (the namespaces it has checkpoints in, for pruning), plus one
``…:threads`` registry and one ``…:seq`` counter. Its keys carry no hash tag, so it runs on a
single Redis (or a replicated one), not on Redis Cluster.

It talks binary: it gets a client of its own (``decode_responses=False``) rather than the
runtime's string client.

Retention: at the end of each run the worker compacts the thread (:meth:`DrydockRedisSaver.acompact`,
under the thread's lease). Deep Agents keeps ``messages`` (and ``files``) in a ``DeltaChannel``,
which a checkpoint stores only as a snapshot every 50 updates; in between, loading a thread
replays the writes of its ancestors back to the last snapshot. Compaction rebuilds each delta
channel's value at the latest checkpoint with the channel's own reducer, stores it there as a
snapshot (``_DeltaSnapshot``) and clears the channel's counter in the checkpoint's metadata, in
one transaction; then it deletes every other checkpoint of the namespace, with their pending
writes and the blobs only they refer to (:meth:`DrydockRedisSaver.keep_latest`). A finished
thread keeps one checkpoint, and the next run loads it without reading any history. The
subgraphs' namespaces (the coder's subagent) are pruned with ``keep_latest`` only.

Loading: a checkpoint is two round trips (the latest's id and payload in one script, then its
blobs and pending writes). The snapshots compaction stored are kept decoded in the saver for
its last :data:`WARM_THREADS` threads, and the thread's next load in this process takes them
instead of decoding the conversation again, once and only while Redis holds exactly the bytes
written (:class:`DrydockRedisSaver`); any other load decodes. The inbox cursor is read alone
(:meth:`DrydockRedisSaver.aget_channel_value`: two round trips, one blob decoded), not with the
whole checkpoint. A run loads the thread's latest checkpoint while it waits on its sandbox
(:meth:`DrydockRedisSaver.preloaded`), and the graph's first load takes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import timedelta
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    PendingWrite,
    get_checkpoint_id,
)
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph_checkpoint_plainredis import AsyncRedisSaver
from langgraph_checkpoint_plainredis.saver import _EMPTY_TAG, _MISSING, _as_str, _pack_typed, _unpack_typed
from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

from drydock.config import RedisSettings
from drydock.infra.redis import Keys, StoreUnavailable, redis_client

HISTORY_PAGE = 64
"""Checkpoints read per round trip when walking back a delta channel's history."""
PRUNE_BATCH = 500
"""Keys per ``DEL`` when pruning a thread's old checkpoints."""
WARM_THREADS = 32
"""Threads whose compacted snapshots a saver keeps for their next load: twice the runs a worker
process holds at once (``DRYDOCK_WORKER_CONCURRENCY``, 16 by default), so that a thread's entry
outlives the runs that end while its follow-up is on its way (a warm follow-up comes while the
sandbox still runs, minutes later). An entry holds the thread's conversation encoded and decoded
(a thread of 120 messages: 107 KiB and about 340 KiB), so the bound is about what that many runs'
conversations hold while they run."""


class _Ancestor:
    """What a history walk needs of one checkpoint: its parent, its pending writes, and the
    stored values of the channels asked for (``None`` where the blob is absent), still encoded:
    a page reaches past the snapshot that ends the walk, and decoding what lies beyond it was
    most of the time a run took to load its history."""

    __slots__ = ("cid", "parent_id", "raw_values", "raw_writes")

    def __init__(
        self, cid: str, parent_id: str | None, raw_writes: dict[bytes, bytes], raw_values: dict[str, bytes | None]
    ) -> None:
        self.cid = cid
        self.parent_id = parent_id
        self.raw_writes = raw_writes
        self.raw_values = raw_values


class _Kept:
    """A delta channel's snapshot as compaction stored it: the version it was stored under, the
    exact bytes written, and the value they encode (the ``_DeltaSnapshot`` compaction built)."""

    __slots__ = ("raw", "value", "version")

    def __init__(self, version: Any, raw: bytes, value: object) -> None:
        self.version = version
        self.raw = raw
        self.value = value


class _Latest:
    """A namespace's latest checkpoint as stored: its id, the checkpoint without its channel
    values, its metadata, its parent's id and its channels' versions."""

    __slots__ = ("cid", "metadata", "parent_id", "stored", "versions")

    def __init__(
        self,
        cid: str,
        stored: Checkpoint,
        metadata: CheckpointMetadata,
        parent_id: str | None,
        versions: dict[str, Any],
    ) -> None:
        self.cid = cid
        self.stored = stored
        self.metadata = metadata
        self.parent_id = parent_id
        self.versions = versions


_LATEST = """
local latest = redis.call('ZREVRANGE', KEYS[1], 0, 0)
if #latest == 0 then
    return false
end
return {latest[1], redis.call('GET', ARGV[1] .. latest[1])}
"""
"""The id and stored payload of a timeline's latest checkpoint, in one round trip. The payload's
key is built here from the checkpoint keys' prefix (the saver runs on a single Redis, see the
module's docstring)."""

_PUT = """
local ttl = tonumber(ARGV[1])
redis.call('SET', KEYS[1], ARGV[2])
for i = 6, #KEYS do
    redis.call('SET', KEYS[i], ARGV[i])
    if ttl > 0 then
        redis.call('EXPIRE', KEYS[i], ttl)
    end
end
local seq = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[3], seq, ARGV[3])
redis.call('SADD', KEYS[4], ARGV[4])
redis.call('HSET', KEYS[5], KEYS[3], ARGV[5])
if ttl > 0 then
    redis.call('EXPIRE', KEYS[1], ttl)
    redis.call('EXPIRE', KEYS[3], ttl)
    redis.call('EXPIRE', KEYS[4], ttl)
end
return seq
"""
"""A checkpoint's whole write, atomic as a transaction: its payload (``KEYS[1]``, ``ARGV[2]``),
its new blobs (``KEYS[i]``, ``ARGV[i]`` from 6 on), its number from the counter (``KEYS[2]``) on
its thread's timeline (``KEYS[3]``, member ``ARGV[3]``), its namespace in the thread's set
(``KEYS[4]``, ``ARGV[4]``) and the timeline in the registry (``KEYS[5]``, ``ARGV[5]``), each
expiring after ``ARGV[1]`` seconds unless that is 0."""

_PUT_WRITES = """
for i = 2, #ARGV, 3 do
    if ARGV[i] == '1' then
        redis.call('HSET', KEYS[1], ARGV[i + 1], ARGV[i + 2])
    else
        redis.call('HSETNX', KEYS[1], ARGV[i + 1], ARGV[i + 2])
    end
end
local ttl = tonumber(ARGV[1])
if ttl > 0 then
    redis.call('EXPIRE', KEYS[1], ttl)
end
return true
"""
"""A task's pending writes into the checkpoint's hash (``KEYS[1]``), atomic: from ``ARGV[2]`` on,
triples of whether the write replaces an earlier one (``1``) or is kept only if first
(``0``), its field and its value; the hash expires after ``ARGV[1]`` seconds unless that is 0."""


def _holds_value(raw: bytes | None) -> bool:
    """Whether a stored blob holds a value (rather than nothing, or the "no value" marker),
    without decoding the value."""
    return raw is not None and _unpack_typed(raw)[0] != _EMPTY_TAG


class DrydockRedisSaver(AsyncRedisSaver):
    """``AsyncRedisSaver`` with fewer round trips per write, reading a delta channel's history a
    page of checkpoints at a time.

    The base saver's ``aput`` numbers a checkpoint with an ``INCR`` before its transaction, and
    ``aput_writes`` reads the fields already written before writing; an agent step writes two
    checkpoints and two tasks' writes, so that was five extra round trips per step. Here each
    write is one script (:data:`_PUT`, :data:`_PUT_WRITES`), as atomic as the transaction was,
    with the same keys and values: one round trip each, and one command for the client to pack
    and one reply to parse instead of a ``MULTI``, eight to ten queued commands and an
    ``EXEC`` (488 against 339 µs of CPU per checkpoint and 381 against 317 µs per task's
    writes, replaying a coder run's writes on this machine).

    Deep Agents keeps ``messages`` in a ``DeltaChannel``, which snapshots every 50 updates; to
    start a run, LangGraph walks back from the latest checkpoint to the last snapshot. The
    base walk loads one checkpoint per step (three round trips each, a few hundred for a
    thread mid-conversation, most of the time to a run's first model call). This one follows
    the same parent links over pages of the thread's timeline, four round trips per page, and
    returns the same history. A thread compacted at its last run's end (:meth:`acompact`) has no
    history to walk; a run resumed after a crash walks back to that compaction.

    Compaction decodes a thread's whole conversation to rebuild it, and the next run's first load
    decoded it again from the snapshot just written (LangGraph's serializer validates every
    message: most of that load's time). So the saver keeps, for the last :attr:`warm_threads`
    threads it compacted, the snapshots it stored (:class:`_Kept`), and the thread's next load
    takes them instead of decoding: only a blob whose key and bytes are exactly those written
    (versions are counters that start again when a thread is deleted and written anew, so the
    bytes are compared too), and only once, so that no two loads ever share objects. The kept
    value is the one compaction built from what it read in Redis, which nothing else holds.
    """

    history_page = HISTORY_PAGE
    warm_threads = WARM_THREADS

    @functools.cached_property
    def _preloads(self) -> dict[tuple[str, str], asyncio.Future[CheckpointTuple | None]]:
        """Loads of a thread's latest checkpoint begun by :meth:`preloaded`, by thread and namespace."""
        return {}

    @functools.cached_property
    def _warm(self) -> OrderedDict[tuple[str, str], dict[str, _Kept]]:
        """The kept snapshots by thread and namespace, least recently compacted first."""
        return OrderedDict()

    def _keep(self, thread_id: str, ns: str, kept: dict[str, _Kept]) -> None:
        self._warm[(thread_id, ns)] = kept
        self._warm.move_to_end((thread_id, ns))
        while len(self._warm) > self.warm_threads:
            self._warm.popitem(last=False)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (the latest without ``checkpoint_id``) with its channel
        values and pending writes, in two round trips: the payload (with the latest's id, in
        one script), then its blobs and writes."""
        thread_id: str = config["configurable"]["thread_id"]
        ns: str = config["configurable"].get("checkpoint_ns", "")
        cid = get_checkpoint_id(config)
        if cid is not None:
            return await self._load_tuple(thread_id, ns, cid)
        preload = self._preloads.pop((thread_id, ns), None)
        if preload is not None:
            return await preload
        return await self._load_latest(thread_id, ns)

    async def _load_latest(self, thread_id: str, ns: str) -> CheckpointTuple | None:
        latest = await self._latest_raw(thread_id, ns)
        return await self._tuple_of(thread_id, ns, *latest) if latest is not None else None

    async def _load_tuple(self, thread_id: str, ns: str, cid: str) -> CheckpointTuple | None:
        raw = cast(bytes | None, await self.client.get(self._key_checkpoint(thread_id, ns, cid)))
        return await self._tuple_of(thread_id, ns, cid, raw) if raw is not None else None

    async def _tuple_of(self, thread_id: str, ns: str, cid: str, raw: bytes) -> CheckpointTuple:
        """The tuple of checkpoint ``cid`` stored as ``raw``. A blob compaction kept
        (:attr:`_warm`) is taken rather than decoded by the thread's first load, whatever it
        loads, and the thread's entry goes with it."""
        stored, metadata, parent_id, versions = self._parse_checkpoint_payload(raw)
        async with self.client.pipeline(transaction=False) as pipe:
            if versions:
                pipe.mget(self._blob_keys(thread_id, ns, versions))
            pipe.hgetall(self._key_writes(thread_id, ns, cid))
            replies = await pipe.execute()
        blobs = cast(list[bytes | None], replies[0]) if versions else []
        raw_writes = cast(dict[bytes, bytes], replies[-1])
        kept = self._warm.pop((thread_id, ns), {})
        values: dict[str, Any] = {}
        for (channel, version), blob in zip(versions.items(), blobs, strict=True):
            held = kept.get(channel)
            if held is not None and held.version == version and held.raw == blob:
                values[channel] = held.value
                continue
            value = self._decode_blob(blob)
            if value is not _MISSING:
                values[channel] = value
        pending = self._parse_pending_writes(thread_id, ns, cid, raw_writes)
        return self._build_tuple(thread_id, ns, cid, stored, metadata, parent_id, values, pending)

    @contextlib.asynccontextmanager
    async def preloaded(self, config: RunnableConfig) -> AsyncIterator[None]:
        """Load the thread's latest checkpoint in the background while the block runs; the
        thread's next load of its latest checkpoint takes it instead of loading again. A run
        starts loading while it waits on its sandbox, under the thread's lease, so nothing writes
        the thread in between. A load not taken by the block's end is dropped."""
        thread_id: str = config["configurable"]["thread_id"]
        key = (thread_id, config["configurable"].get("checkpoint_ns", ""))
        preload = asyncio.ensure_future(self._load_latest(*key))
        self._preloads[key] = preload
        try:
            yield
        finally:
            if self._preloads.get(key) is preload:
                del self._preloads[key]
            if not preload.done():
                preload.cancel()
            elif not preload.cancelled():
                preload.exception()  # retrieved: a failed preload the run never used is not an error

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread_id: str = config["configurable"]["thread_id"]
        ns: str = config["configurable"].get("checkpoint_ns", "")
        cid: str = checkpoint["id"]
        payload = self._payload_for_checkpoint(config, checkpoint, metadata)
        blobs = self._plan_blobs(thread_id, ns, checkpoint.get("channel_values") or {}, new_versions)
        await self._put_script(
            keys=[
                self._key_checkpoint(thread_id, ns, cid),
                self._key_seq(),
                self._key_index(thread_id, ns),
                self._key_namespaces(thread_id),
                self._key_threads(),
                *(key for key, _ in blobs),
            ],
            args=[
                self.ttl or 0,
                payload,
                cid,
                ns,
                json.dumps({"thread": thread_id, "ns": ns}, ensure_ascii=False),
                *(value for _, value in blobs),
            ],
        )
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}}

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        thread_id: str = config["configurable"]["thread_id"]
        ns: str = config["configurable"].get("checkpoint_ns", "")
        key = self._key_writes(thread_id, ns, config["configurable"]["checkpoint_id"])
        args: list[int | str | bytes] = [self.ttl or 0]
        for position, (channel, value) in enumerate(writes):
            index = WRITES_IDX_MAP.get(channel, position)
            # A task's regular writes are kept as first written (a retried task may not replace
            # them); its special writes (errors, interrupts) replace earlier ones.
            args += [1 if index < 0 else 0, f"{task_id}:{index}", self._encode_write(task_id, channel, value)]
        await self._put_writes_script(keys=[key], args=args)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        if not channels:
            return {}
        target = await self.aget_tuple(config)
        thread_id: str = config["configurable"]["thread_id"]
        ns: str = config["configurable"].get("checkpoint_ns", "")
        cursor = target.parent_config["configurable"]["checkpoint_id"] if target and target.parent_config else None
        return await self._history(thread_id, ns, cursor, channels)

    async def _history(
        self, thread_id: str, ns: str, cursor: str | None, channels: Sequence[str]
    ) -> dict[str, DeltaChannelHistory]:
        """The history of ``channels`` for a checkpoint whose parent is ``cursor``."""
        collected: dict[str, list[PendingWrite]] = {channel: [] for channel in channels}
        seeds: dict[str, Any] = {}
        remaining = set(channels)
        async for ancestor in self._walk(thread_id, ns, cursor, remaining):
            if ancestor.raw_writes:
                writes = self._parse_pending_writes(thread_id, ns, ancestor.cid, ancestor.raw_writes)
                for write in reversed(writes):
                    if write[1] in remaining:
                        collected[write[1]].append(write)
            for channel in list(remaining):
                if channel in ancestor.raw_values:
                    value = self._decode_blob(ancestor.raw_values[channel])
                    if value is not _MISSING:
                        seeds[channel] = value
                        remaining.discard(channel)
        history: dict[str, DeltaChannelHistory] = {}
        for channel in channels:
            entry: DeltaChannelHistory = {"writes": list(reversed(collected[channel]))}
            if channel in seeds:
                entry["seed"] = seeds[channel]
            history[channel] = entry
        return history

    async def _walk(self, thread_id: str, ns: str, cursor: str | None, remaining: set[str]) -> AsyncIterator[_Ancestor]:
        """The ancestors from ``cursor`` back, a page at a time, while ``remaining`` (the delta
        channels still without a snapshot, which the caller shrinks) is not empty."""
        loaded: dict[str, _Ancestor] = {}
        while cursor is not None and remaining:
            if cursor not in loaded:
                loaded.update(await self._ancestors(thread_id, ns, cursor, remaining))
                if cursor not in loaded:
                    return
            ancestor = loaded[cursor]
            yield ancestor
            cursor = ancestor.parent_id

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: delete each thread's checkpoints that resuming from its latest one does
        not read (:meth:`keep_latest`); ``delete``: delete the threads' checkpoints. The worker
        compacts instead (:meth:`acompact`), which needs the graph's channels."""
        if strategy not in {"keep_latest", "delete"}:
            raise ValueError(f"unknown pruning strategy {strategy!r}; use keep_latest or delete")
        for thread_id in thread_ids:
            if strategy == "delete":
                await self.adelete_thread(thread_id)
                continue
            for ns in await self._namespaces(thread_id):
                await self.keep_latest(thread_id, ns)

    async def acompact(self, config: RunnableConfig, channels: Mapping[str, object]) -> int:
        """Leave the namespace of ``config`` (its thread's root one without ``checkpoint_ns``) one
        checkpoint, its latest, holding every delta channel's value: first each
        ``DeltaChannel`` of ``channels`` (the compiled graph's ``channels``; its other entries
        are ignored) that the latest checkpoint does not store is rebuilt and stored there as a
        snapshot (:meth:`snapshot_delta_channels`), then every other checkpoint is deleted
        (:meth:`keep_latest`). Loading the thread then reads no history; a crash between the
        two steps leaves a thread that loads from the snapshots, and the next compaction
        deletes the rest.

        Compacting the root namespace also prunes the thread's other namespaces (the subgraphs'
        checkpoints, such as the coder's subagent) with :meth:`keep_latest`: their graphs'
        channels are not at hand, and a finished run reads none of them again.

        Run it only while no one writes the thread: the worker holds the thread's lease, at the
        end of a run. Returns how many checkpoints were deleted.
        """
        thread_id: str = config["configurable"]["thread_id"]
        ns: str = config["configurable"].get("checkpoint_ns", "")
        await self.snapshot_delta_channels(thread_id, ns, channels)
        deleted = await self.keep_latest(thread_id, ns)
        if ns == "":
            for other in await self._namespaces(thread_id):
                if other != "":
                    deleted += await self.keep_latest(thread_id, other)
        return deleted

    async def snapshot_delta_channels(self, thread_id: str, ns: str, channels: Mapping[str, object]) -> list[str]:
        """Store, at the latest checkpoint of ``thread_id`` in ``ns``, a snapshot of each delta
        channel of ``channels`` that it has a version of but no stored value for, rebuilt as
        LangGraph rebuilds it on load (its seed and writes replayed with the channel's own
        reducer), and clear the delta channels of ``channels`` from the checkpoint's
        ``counters_since_delta_snapshot``: one transaction. Returns the channels snapshotted.

        The blob written is the one the latest checkpoint's version names, so every checkpoint
        at that version reads the same value as before, now without its history.
        """
        latest = await self._latest(thread_id, ns)
        if latest is None:
            return []
        specs = {name: spec for name, spec in channels.items() if isinstance(spec, DeltaChannel)}
        versioned = {name: latest.versions[name] for name in specs if name in latest.versions}
        stored = (
            cast(list[bytes | None], await self.client.mget(self._blob_keys(thread_id, ns, versioned)))
            if versioned
            else []
        )
        stale = [name for name, raw in zip(versioned, stored, strict=True) if not _holds_value(raw)]
        counters = dict(latest.metadata.get("counters_since_delta_snapshot") or {})
        if not stale and not counters.keys() & specs.keys():
            return []
        blobs: list[tuple[str, bytes]] = []
        kept: dict[str, _Kept] = {}
        if stale:
            histories = await self._history(thread_id, ns, latest.parent_id, stale)
            for name in stale:
                history = histories[name]
                channel = specs[name].from_checkpoint(history.get("seed"))
                channel.replay_writes(history["writes"])
                snapshot = _DeltaSnapshot(channel.get())
                encoded = _pack_typed(*self.serde.dumps_typed(snapshot))
                blobs.append((self._key_blob(thread_id, ns, name, versioned[name]), encoded))
                kept[name] = _Kept(versioned[name], encoded, snapshot)
        metadata = cast(CheckpointMetadata, dict(latest.metadata))
        left = {name: counted for name, counted in counters.items() if name not in specs}
        if left:
            metadata["counters_since_delta_snapshot"] = left
        else:
            metadata.pop("counters_since_delta_snapshot", None)
        payload = _pack_typed(
            *self.serde.dumps_typed({"checkpoint": latest.stored, "metadata": metadata, "parent_id": latest.parent_id})
        )
        async with self.client.pipeline(transaction=True) as pipe:
            for key, value in [*blobs, (self._key_checkpoint(thread_id, ns, latest.cid), payload)]:
                pipe.set(key, value, keepttl=True)
                if self.ttl:
                    pipe.expire(key, self.ttl)
            await pipe.execute()
        if kept:
            self._keep(thread_id, ns, kept)
        return stale

    async def aget_channel_value(self, config: RunnableConfig, channel: str, default: Any = None) -> Any:
        """The stored value of one channel at the checkpoint ``config`` names (the latest without
        ``checkpoint_id``), decoding only that channel's blob: two round trips. ``default`` when
        there is no checkpoint or it stores no value for the channel. A delta channel stores a
        value (a snapshot) only at some checkpoints; read those through the graph."""
        thread_id: str = config["configurable"]["thread_id"]
        ns: str = config["configurable"].get("checkpoint_ns", "")
        cid = config["configurable"].get("checkpoint_id")
        if cid is None:
            latest = await self._latest(thread_id, ns)
            versions = latest.versions if latest is not None else {}
        else:
            raw = cast(bytes | None, await self.client.get(self._key_checkpoint(thread_id, ns, cid)))
            versions = self._parse_checkpoint_payload(raw)[3] if raw is not None else {}
        if channel not in versions:
            return default
        blob = cast(bytes | None, await self.client.get(self._key_blob(thread_id, ns, channel, versions[channel])))
        value = self._decode_blob(blob)
        return default if value is _MISSING else value

    async def adelete_thread(self, thread_id: str) -> None:
        for key in [key for key in self._warm if key[0] == thread_id]:
            del self._warm[key]
        await super().adelete_thread(thread_id)
        await self.client.delete(self._key_namespaces(thread_id))

    def _key_namespaces(self, thread_id: str) -> str:
        return f"{self.prefix}:namespaces:{thread_id}"

    async def _namespaces(self, thread_id: str) -> list[str]:
        # A thread written before the set existed has its root namespace pruned.
        namespaces = await self.client.smembers(self._key_namespaces(thread_id)) or {b""}
        return sorted(map(_as_str, namespaces))

    @functools.cached_property
    def _latest_script(self) -> AsyncScript:
        return self.client.register_script(_LATEST)

    @functools.cached_property
    def _put_script(self) -> AsyncScript:
        return self.client.register_script(_PUT)

    @functools.cached_property
    def _put_writes_script(self) -> AsyncScript:
        return self.client.register_script(_PUT_WRITES)

    async def _latest_raw(self, thread_id: str, ns: str) -> tuple[str, bytes] | None:
        """The id and stored payload of the latest checkpoint of ``thread_id`` in ``ns``."""
        reply = await self._latest_script(
            keys=[self._key_index(thread_id, ns)], args=[self._key_checkpoint(thread_id, ns, "")]
        )
        if not reply or reply[1] is None:
            return None
        return _as_str(reply[0]), cast(bytes, reply[1])

    async def _latest(self, thread_id: str, ns: str) -> _Latest | None:
        """The latest checkpoint of ``thread_id`` in ``ns``, without its channel values."""
        latest = await self._latest_raw(thread_id, ns)
        if latest is None:
            return None
        stored, metadata, parent_id, versions = self._parse_checkpoint_payload(latest[1])
        return _Latest(latest[0], stored, metadata, parent_id, versions)

    async def keep_latest(self, thread_id: str, ns: str = "") -> int:
        """Delete the checkpoints of ``thread_id`` in ``ns`` that resuming from its latest one
        does not read: all but the latest and, for each delta channel it replays, its ancestors
        back to that channel's last snapshot (LangGraph's first safe option for ``DeltaChannel``);
        with them their pending writes and the blobs no kept checkpoint refers to. Nothing is
        deleted while a delta channel has no snapshot yet (its replay starts at the first
        checkpoint). Returns how many checkpoints were deleted.

        Run it only while no one writes the thread (the worker holds its lease).
        """
        latest = await self._latest(thread_id, ns)
        if latest is None:
            return 0
        kept = {latest.cid}
        remaining = set(latest.metadata.get("counters_since_delta_snapshot") or {})
        async for ancestor in self._walk(thread_id, ns, latest.parent_id, remaining):
            kept.add(ancestor.cid)
            for channel in list(remaining):
                if channel in ancestor.raw_values and _holds_value(ancestor.raw_values[channel]):
                    remaining.discard(channel)
        if remaining:
            return 0
        index = self._key_index(thread_id, ns)
        doomed = [cid for cid in map(_as_str, await self.client.zrange(index, 0, -1)) if cid not in kept]
        if not doomed:
            return 0
        referenced: set[str] = set()
        unreferenced: set[str] = set()
        for cids, blobs in ((sorted(kept), referenced), (doomed, unreferenced)):
            payloads = await self.client.mget([self._key_checkpoint(thread_id, ns, cid) for cid in cids])
            for raw in cast(list[bytes | None], payloads):
                if raw is not None:
                    blobs.update(self._blob_keys(thread_id, ns, self._parse_checkpoint_payload(raw)[3]))
        garbage = [
            *(self._key_checkpoint(thread_id, ns, cid) for cid in doomed),
            *(self._key_writes(thread_id, ns, cid) for cid in doomed),
            *sorted(unreferenced - referenced),
        ]
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.zrem(index, *doomed)
            for start in range(0, len(garbage), PRUNE_BATCH):
                pipe.delete(*garbage[start : start + PRUNE_BATCH])
            await pipe.execute()
        return len(doomed)

    async def _ancestors(self, thread_id: str, ns: str, start: str, channels: set[str]) -> dict[str, _Ancestor]:
        """``start`` and the checkpoints before it on the thread's timeline, up to a page."""
        index = self._key_index(thread_id, ns)
        score = await self.client.zscore(index, start)
        if score is None:
            return {}
        older = await self.client.zrevrangebyscore(index, f"({score}", "-inf", start=0, num=self.history_page - 1)
        ids = [start, *(_as_str(member) for member in older)]
        async with self.client.pipeline(transaction=False) as pipe:
            for cid in ids:
                pipe.get(self._key_checkpoint(thread_id, ns, cid))
                pipe.hgetall(self._key_writes(thread_id, ns, cid))
            replies = await pipe.execute()
        parsed = []
        blob_keys: list[str] = []
        for position, cid in enumerate(ids):
            raw, raw_writes = replies[2 * position], replies[2 * position + 1]
            if raw is None:
                continue
            _, _, parent_id, versions = self._parse_checkpoint_payload(raw)
            wanted = {channel: version for channel, version in versions.items() if channel in channels}
            parsed.append((cid, parent_id, raw_writes, wanted, len(blob_keys)))
            blob_keys.extend(self._blob_keys(thread_id, ns, wanted))
        blobs = cast(list[bytes | None], await self.client.mget(blob_keys)) if blob_keys else []
        return {
            cid: _Ancestor(
                cid, parent_id, raw_writes, {channel: blobs[first + offset] for offset, channel in enumerate(wanted)}
            )
            for cid, parent_id, raw_writes, wanted, first in parsed
        }


def build_checkpointer(client: Redis, keys: Keys, *, ttl: timedelta | None = None) -> AsyncRedisSaver:
    """The async checkpointer on ``client`` (which must return bytes), under ``keys``' prefix.

    ``ttl`` expires a thread's checkpoints that long after their last write; ``None`` keeps
    them until the thread is deleted.
    """
    if client.get_encoder().decode_responses:
        raise ValueError("the checkpointer needs a Redis client with decode_responses=False")
    seconds = int(ttl.total_seconds()) if ttl is not None else None
    return DrydockRedisSaver(client, prefix=keys.checkpoints(), ttl=seconds)


@contextlib.asynccontextmanager
async def open_checkpointer(
    settings: RedisSettings, *, ttl: timedelta | None = None, url: str | None = None
) -> AsyncIterator[AsyncRedisSaver]:
    """Connect a binary client (checked with a PING), yield the checkpointer, close the client.

    Raises :class:`~drydock.infra.redis.StoreUnavailable` naming the server that cannot be reached.
    """
    target = url or settings.url
    if target is None:
        raise StoreUnavailable("DRYDOCK_REDIS_URL is not set")
    client = redis_client(settings, target, decode_responses=False)
    try:
        try:
            await client.ping()
        except (RedisError, OSError) as error:
            raise StoreUnavailable(f"cannot reach Redis at {target}: {error}") from None
        yield build_checkpointer(client, Keys(settings.key_prefix), ttl=ttl)
    finally:
        await client.aclose()
