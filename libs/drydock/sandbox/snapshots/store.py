"""The snapshot store: a thread's worktree saved to, and restored from, the NATS object store.

Saves of one thread must not overlap: the caller holds the thread lease (DESIGN.md section 3),
which is what makes the read-modify-write of the thread's index safe.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import TypeVar

import structlog
from deepagents.backends.protocol import SandboxBackendProtocol
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.errors import BucketNotFoundError, DigestMismatchError, NotFoundError
from nats.js.object_store import (
    OBJ_CHUNKS_PRE_TEMPLATE,
    OBJ_META_PRE_TEMPLATE,
    OBJ_STREAM_TEMPLATE,
    ObjectStore,
)
from pydantic import ValidationError

from drydock.config import SnapshotSettings
from drydock.errors import describe
from drydock.sandbox.snapshots.capture import Captured, TooLarge, Unchanged, capture
from drydock.sandbox.snapshots.errors import SnapshotCorrupt, SnapshotError
from drydock.sandbox.snapshots.rebuild import rebuild
from drydock.sandbox.snapshots.records import SnapshotIndex, SnapshotInfo, check_thread_id, index_name
from drydock.sandbox.snapshots.sandbox_script import check_repo_dir

log = structlog.get_logger(__name__)

T = TypeVar("T")


class SnapshotStore:
    """Workspace snapshots per thread in one object store bucket (``settings.bucket``).

    :meth:`save` runs at a turn boundary; :meth:`restore` runs after a sandbox is recreated.
    The bucket is provisioned at start-up (:func:`drydock.bus.provision`), never here.
    """

    def __init__(self, js: JetStreamContext, settings: SnapshotSettings) -> None:
        self._js = js
        self._settings = settings
        self._timeout = max(1, int(settings.command_timeout.total_seconds()))
        self._stream = OBJ_STREAM_TEMPLATE.format(bucket=settings.bucket)
        self._bucket: ObjectStore | None = None

    async def save(self, thread_id: str, sandbox: SandboxBackendProtocol, *, repo_dir: str) -> SnapshotInfo | None:
        """Snapshot the git worktree at ``repo_dir`` in ``sandbox``; return the thread's latest snapshot.

        ``repo_dir`` is absolute or relative to the sandbox's workspace (preferred: it stays
        valid when a recreated sandbox has its workspace elsewhere).

        Captured: local commits no remote-tracking ref has (a bundle of every local branch and
        HEAD), staged and unstaged changes, untracked files not excluded by ``.gitignore``, and
        the remotes, branch upstreams, branch and HEAD that a restore needs. Nothing changed since
        the latest snapshot: nothing is stored and that snapshot is returned. Over
        ``settings.max_bytes``: nothing is stored, the refusal is logged, and None is returned.
        Older snapshots beyond ``settings.keep`` are pruned. A thread has one repository: a save
        from another ``repo_dir`` becomes the thread's latest snapshot.
        """
        check_thread_id(thread_id)
        repo_dir = check_repo_dir(repo_dir)
        index = await self._read_index(thread_id)
        previous = index.snapshots[-1] if index.snapshots else None
        same_place = previous is not None and previous.repo_dir == repo_dir
        try:
            captured = await capture(
                sandbox,
                repo_dir,
                max_bytes=self._settings.max_bytes,
                previous_fingerprint=previous.fingerprint if previous and same_place else None,
                time_limit=self._timeout,
            )
        except SnapshotError as error:
            raise type(error)(f"thread {thread_id}: cannot snapshot {repo_dir}: {error}") from error
        if isinstance(captured, Unchanged):
            assert previous is not None  # only a previous fingerprint can match
            log.debug("snapshot unchanged", thread_id=thread_id, seq=previous.seq)
            return previous
        if isinstance(captured, TooLarge):
            log.warning(
                "snapshot not stored: larger than the bound",
                thread_id=thread_id,
                size=captured.size,
                max_bytes=self._settings.max_bytes,
                latest_seq=previous.seq if previous else None,
            )
            return None
        info = await self._store(thread_id, repo_dir, index, captured)
        log.info("snapshot saved", thread_id=thread_id, seq=info.seq, size=info.size, head=info.head)
        return info

    async def restore(self, thread_id: str, sandbox: SandboxBackendProtocol, *, repo_dir: str | None = None) -> bool:
        """Rebuild the worktree at ``repo_dir`` in a fresh ``sandbox`` from the thread's latest snapshot.

        ``repo_dir`` defaults to where the snapshot was taken.

        The repository is rebuilt from the recorded remotes (fetched as the sandbox's git is
        configured), the snapshot's commits, staged, unstaged and untracked changes, and checked
        against the recorded state before it replaces ``repo_dir``. An existing clean clone at
        ``repo_dir`` is replaced; one with changes of its own is refused. Returns False when the
        thread has no snapshot; raises :class:`SnapshotCorrupt` for a damaged snapshot and
        :class:`SnapshotError` for any other failure, leaving ``repo_dir`` untouched.
        """
        check_thread_id(thread_id)
        if repo_dir is not None:
            repo_dir = check_repo_dir(repo_dir)
        info = await self.latest(thread_id)
        if info is None:
            return False
        repo_dir = repo_dir or info.repo_dir
        archive = await self._fetch(info)
        try:
            await rebuild(sandbox, repo_dir, archive, state=info.state, time_limit=self._timeout)
        except SnapshotError as error:
            raise type(error)(
                f"thread {thread_id}: cannot restore snapshot {info.seq} to {repo_dir}: {error}"
            ) from error
        log.info("snapshot restored", thread_id=thread_id, seq=info.seq, head=info.head, sandbox=sandbox.id)
        return True

    async def latest(self, thread_id: str) -> SnapshotInfo | None:
        """The thread's newest snapshot, or None."""
        snapshots = await self.history(thread_id)
        return snapshots[-1] if snapshots else None

    async def history(self, thread_id: str) -> list[SnapshotInfo]:
        """The thread's stored snapshots, oldest first."""
        check_thread_id(thread_id)
        return (await self._read_index(thread_id)).snapshots

    async def prune(self, thread_id: str) -> list[SnapshotInfo]:
        """Remove all but the newest ``settings.keep`` snapshots; return the removed ones."""
        check_thread_id(thread_id)
        return await self._prune(thread_id, await self._read_index(thread_id), keep=self._settings.keep)

    async def delete(self, thread_id: str) -> None:
        """Remove every snapshot of the thread and its index (the thread is gone)."""
        check_thread_id(thread_id)
        await self._prune(thread_id, await self._read_index(thread_id), keep=0)
        await self._remove(index_name(thread_id))

    async def _store(self, thread_id: str, repo_dir: str, index: SnapshotIndex, captured: Captured) -> SnapshotInfo:
        info = SnapshotInfo(
            thread_id=thread_id,
            repo_dir=repo_dir,
            seq=index.next_seq,
            size=len(captured.archive),
            sha256=hashlib.sha256(captured.archive).hexdigest(),
            fingerprint=captured.fingerprint,
            state=captured.state,
            head=captured.head,
            branch=captured.branch,
            created_at=datetime.now(UTC),
        )
        bucket = await self._open()
        await self._nats(f"thread {thread_id}: cannot store snapshot", bucket.put(info.name, captured.archive))
        # The archive first, then the index that makes it visible: a crash in between leaves an
        # unlisted archive that the next save overwrites under the same sequence number.
        index = SnapshotIndex(next_seq=info.seq + 1, snapshots=[*index.snapshots, info])
        await self._write_index(thread_id, index)
        await self._prune(thread_id, index, keep=self._settings.keep)
        return info

    async def _prune(self, thread_id: str, index: SnapshotIndex, *, keep: int) -> list[SnapshotInfo]:
        dropped = index.snapshots[: max(0, len(index.snapshots) - keep)]
        if not dropped:
            return []
        # Archives first, then the index: a crash in between leaves listed-but-removed old
        # snapshots that the next prune removes again, never an archive nothing points to.
        for info in dropped:
            await self._remove(info.name)
        kept = index.snapshots[len(dropped) :]
        await self._write_index(thread_id, SnapshotIndex(next_seq=index.next_seq, snapshots=kept))
        log.info("snapshots pruned", thread_id=thread_id, removed=[info.seq for info in dropped])
        return dropped

    async def _fetch(self, info: SnapshotInfo) -> bytes:
        bucket = await self._open()
        what = f"thread {info.thread_id}: snapshot {info.seq}"
        try:
            stored = await self._nats(f"{what}: cannot read", bucket.get_info(info.name))
        except NotFoundError:
            raise SnapshotCorrupt(f"{what} is listed but missing from bucket {self._settings.bucket!r}") from None
        if stored.size != info.size or not stored.nuid:
            raise SnapshotCorrupt(f"{what} is damaged: {stored.size} bytes stored, {info.size} recorded")
        # nats-py waits forever for chunks that are all gone; ask for the last one first.
        chunks = OBJ_CHUNKS_PRE_TEMPLATE.format(bucket=self._settings.bucket, obj=stored.nuid)
        try:
            await self._nats(f"{what}: cannot read", self._js.get_last_msg(self._stream, chunks))
        except NotFoundError:
            raise SnapshotCorrupt(f"{what} is damaged: its data is gone") from None
        try:
            result = await self._nats(f"{what}: cannot read", bucket.get(info.name))
        except NotFoundError:
            raise SnapshotCorrupt(f"{what} is listed but missing from bucket {self._settings.bucket!r}") from None
        except DigestMismatchError:
            raise SnapshotCorrupt(f"{what} is damaged: its data does not match its digest") from None
        data = result.data or b""
        if len(data) != info.size or hashlib.sha256(data).hexdigest() != info.sha256:
            raise SnapshotCorrupt(f"{what} is damaged: {len(data)} bytes that do not match the record")
        return data

    async def _read_index(self, thread_id: str) -> SnapshotIndex:
        bucket = await self._open()
        try:
            result = await self._nats(
                f"thread {thread_id}: cannot read the snapshot index", bucket.get(index_name(thread_id))
            )
        except NotFoundError:
            return SnapshotIndex()
        except DigestMismatchError:
            raise SnapshotCorrupt(f"thread {thread_id}: the snapshot index is damaged") from None
        try:
            return SnapshotIndex.model_validate_json(result.data or b"")
        except ValidationError as error:
            raise SnapshotCorrupt(f"thread {thread_id}: the snapshot index is unreadable: {error}") from None

    async def _write_index(self, thread_id: str, index: SnapshotIndex) -> None:
        bucket = await self._open()
        data = index.model_dump_json().encode()
        await self._nats(
            f"thread {thread_id}: cannot write the snapshot index", bucket.put(index_name(thread_id), data)
        )

    async def _remove(self, name: str) -> None:
        """Remove an object with no tombstone left behind: chunks first, then its metadata."""
        bucket = await self._open()
        name_token = base64.urlsafe_b64encode(name.encode()).decode()
        try:
            info = await self._nats(f"cannot look up {name}", bucket.get_info(name, show_deleted=True))
        except NotFoundError:
            return
        if info.nuid:
            chunks = OBJ_CHUNKS_PRE_TEMPLATE.format(bucket=self._settings.bucket, obj=info.nuid)
            await self._nats(f"cannot remove {name}", self._js.purge_stream(self._stream, subject=chunks))
        meta = OBJ_META_PRE_TEMPLATE.format(bucket=self._settings.bucket, obj=name_token)
        await self._nats(f"cannot remove {name}", self._js.purge_stream(self._stream, subject=meta))

    async def _open(self) -> ObjectStore:
        if self._bucket is None:
            try:
                self._bucket = await self._js.object_store(self._settings.bucket)
            except BucketNotFoundError:
                raise SnapshotError(
                    f"object store bucket {self._settings.bucket!r} does not exist; "
                    "it is created at start-up by drydock.bus.provision"
                ) from None
        return self._bucket

    async def _nats(self, what: str, operation: Awaitable[T]) -> T:
        """Await an object store operation within the timeout; transport failures become :class:`SnapshotError`.

        A missing chunk makes nats-py wait forever for it, hence the bound on reads too.
        """
        try:
            async with asyncio.timeout(self._timeout):
                return await operation
        except (NotFoundError, DigestMismatchError):
            raise
        except TimeoutError:
            raise SnapshotError(f"{what}: no answer from NATS within {self._timeout} s") from None
        except NatsError as error:
            raise SnapshotError(f"{what}: {describe(error)}") from None
