"""Which sandbox serves a thread: :meth:`SandboxManager.ensure_sandbox` (DESIGN.md section 4).

The truth is the thread's metadata field ``sandbox_id``: a sandbox id, a creation sentinel
(:mod:`drydock.sandbox.sentinel`), or nothing. It changes only by compare-and-set, so two
processes never both create a sandbox for one thread. The in-process cache (thread id → backend
and grant) only saves the reconnect; a cached sandbox that the metadata no longer names is
dropped. In order, for thread T:

1. cached and named by the metadata: health check (the git identity's command doubles as it,
   the health route is asked only when that command is slow or fails to get through). Healthy: refresh the grant (a
   grant extended moments ago is only checked, see
   :meth:`~drydock.sandbox.credentials.SandboxCredentials.refresh`). Unhealthy: recreate
   (replace the id by a sentinel, delete the old sandbox, create, restore).
2. a sentinel, and nothing cached: if it is stale (its owner is gone), remove it by
   compare-and-set and create a replacement; if its owner is still creating, wait for it.
3. nothing: write our sentinel by compare-and-set, create, replace the sentinel by the id.
4. an id, and nothing cached: reconnect; if the sandbox is gone or unhealthy, recreate.

After any of these the automation's git identity is applied again (skipped only when
~/.gitconfig is byte for byte what it was right after this manager last applied it, which a
shell builtin checks without starting git), the sandbox's last use is recorded, and the thread's
failure count is reset; a failure increments it (see
:class:`~drydock.sandbox.failures.SandboxFailures`). Every new sandbox gets a new grant and is
offered the thread's latest workspace snapshot; a restore that raises removes the new sandbox
again, so an empty sandbox never silently replaces lost work.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

import structlog
from redis.asyncio import Redis
from redis.exceptions import RedisError

from drydock.config import SandboxSettings
from drydock.errors import describe
from drydock.infra.cancellation import pause
from drydock.infra.redis import Keys
from drydock.infra.server_keys import ServerKeys
from drydock.roles import Role
from drydock.runtime import Runtime
from drydock.sandbox import git_setup, metrics
from drydock.sandbox.backend import CommandResult, SandboxBackend
from drydock.sandbox.credentials import GrantError, NoProxy, SandboxCredentials, SandboxGrant
from drydock.sandbox.errors import SandboxError, SandboxNotFound, SandboxUnavailable
from drydock.sandbox.failures import SandboxFailures
from drydock.sandbox.handle import SandboxHandle
from drydock.sandbox.provider import SandboxProvider
from drydock.sandbox.providers import create_provider
from drydock.sandbox.reaper import ReapReport, reap
from drydock.sandbox.records import SandboxStore
from drydock.sandbox.sentinel import CreationSentinel, CreatorHeartbeat
from drydock.threads.fields import SANDBOX_ID
from drydock.threads.metadata import ThreadMetadata, ThreadMetadataStore, ThreadNotFound

log = structlog.get_logger(__name__)

_WAIT_INTERVAL = 0.05
_TOUCH_INTERVAL = 30.0


class SnapshotRestorer(Protocol):
    """Restores a thread's latest workspace snapshot into a new sandbox
    (implemented by :class:`drydock.sandbox.snapshots.SnapshotStore`)."""

    async def restore(self, thread_id: str, sandbox: SandboxBackend) -> bool:
        """True if a snapshot was restored, False if the thread has none."""
        ...


class SandboxSetupFailed(SandboxError):
    """A command that prepares the sandbox (credential grant, git identity) failed inside it."""


@dataclass
class _Cached:
    backend: SandboxBackend
    grant: SandboxGrant
    gitconfig: str | None = None
    """The sandbox's ~/.gitconfig right after the identity was last applied."""


def choose_credentials(provider: SandboxProvider, credentials: SandboxCredentials) -> SandboxCredentials:
    """``credentials`` when ``provider`` declares a path to the credential proxy, otherwise
    :class:`~drydock.sandbox.credentials.NoProxy`: the proxy is skipped explicitly, never tried."""
    if provider.reaches_credential_proxy:
        return credentials
    log.info("the sandbox provider has no path to the credential proxy; sandboxes get no grant", provider=provider.name)
    return NoProxy()


class SandboxManager:
    """Gives each thread its one sandbox, across processes; see the module documentation."""

    def __init__(
        self,
        *,
        provider: SandboxProvider,
        records: SandboxStore,
        metadata: ThreadMetadataStore,
        credentials: SandboxCredentials,
        redis: Redis,
        keys: Keys,
        settings: SandboxSettings,
        snapshots: SnapshotRestorer | None = None,
        owner: str | None = None,
    ) -> None:
        self.provider = provider
        self.records = records
        self.metadata = metadata
        self.credentials = choose_credentials(provider, credentials)
        self.failures = SandboxFailures(redis, keys)
        self._redis = redis
        self.settings = settings
        self.snapshots = snapshots
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._heartbeat = CreatorHeartbeat(redis, keys, interval=settings.creator_heartbeat)
        self._cache: dict[str, _Cached] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    @classmethod
    def from_runtime(
        cls,
        runtime: Runtime,
        *,
        credentials: SandboxCredentials,
        snapshots: SnapshotRestorer | None = None,
    ) -> SandboxManager:
        """A manager for a worker: the provider named by ``DRYDOCK_SANDBOX_PROVIDER``, the
        runtime's Redis, the given credentials (replaced by :class:`~drydock.sandbox.credentials.NoProxy`
        when the provider declares no path to the proxy) and snapshot restorer."""
        records = SandboxStore(runtime.redis, runtime.keys, ServerKeys.from_settings(runtime.settings.crypto))
        return cls(
            provider=create_provider(runtime.settings, records),
            records=records,
            metadata=ThreadMetadataStore(runtime.redis, runtime.keys),
            credentials=credentials,
            redis=runtime.redis,
            keys=runtime.keys,
            settings=runtime.settings.sandbox,
            snapshots=snapshots,
        )

    def secrets(self, thread_id: str) -> dict[str, str]:
        """The secret values of the thread's sandbox as this process holds it (its proxy grant and
        its daemon token), each mapped to what it is: to keep them out of what the agent posts."""
        cached = self._cache.get(thread_id)
        if cached is None:
            return {}
        found = {cached.backend.handle.token: "sandbox daemon token"}
        if cached.grant.token:
            found[cached.grant.token] = "sandbox grant"
        return found

    def cached(self, thread_id: str) -> SandboxBackend | None:
        """The thread's sandbox as this process last held it, unchecked: what
        :meth:`ensure_sandbox` returns when it still answers."""
        cached = self._cache.get(thread_id)
        return cached.backend if cached is not None else None

    async def ensure_sandbox(self, thread_id: str, *, read: ThreadMetadata | None = None) -> SandboxBackend:
        """The thread's healthy sandbox, created, reconnected or recreated as needed; ``read``:
        the thread's metadata as the caller just read it, which stands for the first read (a
        sandbox id that has changed since fails the compare-and-set, and the field is read again).

        Raises :class:`~drydock.threads.metadata.ThreadNotFound` for a thread without metadata
        and a :class:`~drydock.sandbox.errors.SandboxError` (or :class:`GrantError`, or the
        snapshot restorer's error) when no sandbox can be provided; each such failure is
        counted for the thread.
        """
        async with self._thread_lock(thread_id):
            try:
                entry, identity_applied = await self._ensure(thread_id, read)
                if not identity_applied:
                    await self._apply_identity(entry)
            except ThreadNotFound:
                raise
            except Exception:
                await self._count_failure(thread_id)
                raise
            async with self._redis.pipeline(transaction=False) as pipe:
                self.records.queue_touch(pipe, entry.backend.id)
                self.failures.queue_reset(pipe, thread_id)
                await pipe.execute()
            return entry.backend

    async def _count_failure(self, thread_id: str) -> None:
        metrics.FAILURES.labels(self.provider.name).inc()
        try:
            count = await self.failures.record(thread_id)
        except RedisError:
            log.exception("no sandbox for the thread, and the failure could not be counted", thread_id=thread_id)
            return
        log.exception("no sandbox for the thread", thread_id=thread_id, failures=count)

    @contextlib.asynccontextmanager
    async def _thread_lock(self, thread_id: str) -> AsyncIterator[None]:
        # Only keeps this process's own coroutines in line; processes are kept apart by the
        # compare-and-set on the metadata.
        lock = self._locks.setdefault(thread_id, asyncio.Lock())
        try:
            async with lock:
                yield
        finally:
            if not lock.locked() and self._locks.get(thread_id) is lock:
                del self._locks[thread_id]

    async def _ensure(self, thread_id: str, read: ThreadMetadata | None) -> tuple[_Cached, bool]:
        """The thread's sandbox, and whether its git identity was already applied on the way."""
        deadline = time.monotonic() + self.settings.creation_timeout.total_seconds() + 10.0
        while True:
            thread = read or await self.metadata.get(thread_id)
            read = None
            current, role, repository = thread.sandbox_id, thread.kind, thread.repository
            cached = self._cache.get(thread_id)
            if cached is not None and cached.backend.id != current:
                log.info("cached sandbox is no longer the thread's", thread_id=thread_id, sandbox_id=cached.backend.id)
                await self._evict(thread_id, revoke=True)
                cached = None
            if cached is not None:
                if await self._reuse(thread_id, cached):
                    return cached, True
                entry = await self._replace(thread_id, expected=current, role=role, repository=repository)
            elif current is None:
                entry = await self._replace(thread_id, expected=None, role=role, repository=repository)
            elif (sentinel := CreationSentinel.parse(current)) is not None:
                if await self._is_stale(thread_id, sentinel):
                    if await self.metadata.compare_and_set(thread_id, SANDBOX_ID, expected=current, new=None):
                        log.warning("removed a stale creation sentinel", thread_id=thread_id, owner=sentinel.owner)
                elif time.monotonic() > deadline:
                    raise SandboxUnavailable(f"thread {thread_id}: another process is still creating its sandbox")
                else:
                    await asyncio.sleep(_WAIT_INTERVAL)
                continue
            else:
                entry = await self._reconnect(thread_id, current, role=role, repository=repository)
            if entry is not None:
                return entry, False

    async def _reuse(self, thread_id: str, cached: _Cached) -> bool:
        """Case 1: True if the cached sandbox answers (its git identity applied, its grant
        refreshed); False after evicting one that does not.

        The identity's command is the health check (see :meth:`_answers`). The grant's refresh
        starts with it: a dead sandbox's grant is revoked when it is evicted, and a grant that
        cannot be refreshed is replaced only once the sandbox is known to answer.
        """
        identity = asyncio.ensure_future(self._apply_identity(cached))
        refresh = asyncio.ensure_future(self.credentials.refresh(cached.grant))
        try:
            answers = await self._answers(cached.backend, identity)
        except BaseException:
            identity.cancel()
            await asyncio.gather(identity, refresh, return_exceptions=True)
            raise
        if not answers:
            identity.cancel()
            await asyncio.gather(identity, refresh, return_exceptions=True)
            log.warning("cached sandbox is unhealthy; recreating it", thread_id=thread_id, sandbox_id=cached.backend.id)
            await self._evict(thread_id, revoke=True)
            return False
        await asyncio.gather(refresh, return_exceptions=True)
        identity.result()
        try:
            refresh.result()
        except GrantError as error:
            log.warning("grant could not be refreshed; issuing a new one", thread_id=thread_id, error=describe(error))
            cached.grant = await self._grant(cached.backend, thread_id, cached.grant.role, cached.grant.repository)
        return True

    async def _answers(self, backend: SandboxBackend, command: asyncio.Future[None]) -> bool:
        """Whether the sandbox's daemon answers, with ``command`` (a request already sent to it)
        as the probe: a command the daemon ran, whatever its exit status, proves it alive and
        holding our token, which its health route would only repeat for another round trip.

        The health route decides, as it did alone before, only when the command has not come
        back within the health timeout (a daemon that stopped answering, as a pod on a lost node
        behind a kept-alive connection, is found then, not at the command's own time limit) or
        came back unavailable (a daemon that is gone, or one that refused the command while
        healthy: then the command's error is the caller's, and the sandbox is kept).
        """
        done, _ = await asyncio.wait({command}, timeout=self.settings.health_timeout.total_seconds())
        if done and (command.cancelled() or not isinstance(command.exception(), SandboxUnavailable)):
            return True
        if not await backend.is_healthy():
            return False
        await asyncio.wait({command})
        return True

    async def _reconnect(
        self, thread_id: str, sandbox_id: str, *, role: Role, repository: str | None
    ) -> _Cached | None:
        """Case 4: reconnect to the sandbox the metadata names; recreate it if that fails."""
        try:
            handle = await self.provider.connect(sandbox_id)
            backend = self._backend(handle)
            try:
                await backend.health()
            except BaseException:
                await backend.aclose()
                raise
        except (SandboxNotFound, SandboxUnavailable) as error:
            log.warning(
                "cannot reconnect; recreating the sandbox",
                thread_id=thread_id,
                sandbox_id=sandbox_id,
                error=describe(error),
            )
            return await self._replace(thread_id, expected=sandbox_id, role=role, repository=repository)
        try:
            grant = await self._grant(backend, thread_id, role, repository)
        except BaseException:
            await backend.aclose()
            raise
        entry = self._cache[thread_id] = _Cached(backend, grant)
        log.info("reconnected to the sandbox", thread_id=thread_id, sandbox_id=sandbox_id)
        return entry

    async def _replace(
        self, thread_id: str, *, expected: str | None, role: Role, repository: str | None
    ) -> _Cached | None:
        """Cases 3 and (re)creation: swap ``expected`` for our sentinel, create, record the id.
        ``None`` when another process changed the field first (the caller reads it again)."""
        sentinel = CreationSentinel.now(self.owner).encode()
        async with self._heartbeat.beating(thread_id, self.owner):
            if not await self.metadata.compare_and_set(thread_id, SANDBOX_ID, expected=expected, new=sentinel):
                return None
            if expected is not None:
                await self._delete_quietly(expected)
            started = time.monotonic()
            try:
                handle = await self.provider.create(thread_id, labels={"role": role.value})
            except BaseException:
                await self.metadata.compare_and_set(thread_id, SANDBOX_ID, expected=sentinel, new=None)
                raise
            metrics.CREATE_SECONDS.labels(self.provider.name).observe(time.monotonic() - started)
            if not await self.metadata.compare_and_set(thread_id, SANDBOX_ID, expected=sentinel, new=handle.id):
                log.warning("our creation sentinel was taken over; discarding the new sandbox", thread_id=thread_id)
                await self._delete_quietly(handle.id)
                return None
        log.info("sandbox ready for the thread", thread_id=thread_id, sandbox_id=handle.id, replaced=expected)
        backend = self._backend(handle)
        try:
            grant = await self._grant(backend, thread_id, role, repository)
            entry = self._cache[thread_id] = _Cached(backend, grant)
            await self._restore(thread_id, backend)
        except BaseException:
            await self._evict(thread_id, revoke=True)
            await backend.aclose()
            if await self.metadata.compare_and_set(thread_id, SANDBOX_ID, expected=handle.id, new=None):
                await self._delete_quietly(handle.id)
            raise
        return entry

    async def _is_stale(self, thread_id: str, sentinel: CreationSentinel) -> bool:
        if sentinel.owner == self.owner:
            return True
        if time.time() - sentinel.started_at > self.settings.creation_timeout.total_seconds():
            return True
        return not await self._heartbeat.alive(thread_id, sentinel.owner)

    def _backend(self, handle: SandboxHandle) -> SandboxBackend:
        backend = SandboxBackend(
            handle,
            default_timeout=self.settings.exec_timeout.total_seconds(),
            max_timeout=self.settings.max_exec_timeout.total_seconds(),
            health_timeout=self.settings.health_timeout.total_seconds(),
            output_cap=self.settings.output_cap,
        )
        backend.on_use = self._toucher(handle.id)
        return backend

    def _toucher(self, sandbox_id: str) -> _Toucher:
        return _Toucher(self.records, sandbox_id)

    async def _grant(self, backend: SandboxBackend, thread_id: str, role: Role, repository: str | None) -> SandboxGrant:
        """Issue a grant for the sandbox and apply it inside: environment and git rules."""
        grant = await self.credentials.issue(backend.handle, thread_id=thread_id, role=role, repository=repository)
        backend.environment = dict(grant.environment)
        await self._run_setup(backend, git_setup.grant_script(grant.git_config), "apply the credential grant")
        return grant

    async def _apply_identity(self, entry: _Cached) -> None:
        """Apply the identity unless ~/.gitconfig is byte for byte what it was after we last
        applied it (a check with shell builtins only: the warm path spawns no git)."""
        script = git_setup.identity_script(
            self.settings.git_user_name, self.settings.git_user_email, unchanged_since=entry.gitconfig
        )
        result = await self._run_setup(entry.backend, script, "apply the git identity")
        if result.output:
            entry.gitconfig = result.output

    async def _run_setup(self, backend: SandboxBackend, script: str, what: str) -> CommandResult:
        result = await backend.run(script, time_limit=60.0)
        if result.exit_code != 0:
            raise SandboxSetupFailed(
                f"sandbox {backend.id}: could not {what} (exit {result.exit_code}): {result.output}"
            )
        return result

    async def _restore(self, thread_id: str, backend: SandboxBackend) -> None:
        if self.snapshots is None:
            return
        restored = await self.snapshots.restore(thread_id, backend)
        log.info(
            "snapshot restored" if restored else "no snapshot to restore", thread_id=thread_id, sandbox_id=backend.id
        )

    async def _evict(self, thread_id: str, *, revoke: bool) -> None:
        cached = self._cache.pop(thread_id, None)
        if cached is None:
            return
        await cached.backend.aclose()
        if revoke:
            try:
                await self.credentials.revoke(cached.grant)
            except GrantError as error:
                log.warning("grant could not be revoked", thread_id=thread_id, error=describe(error))

    async def _delete_quietly(self, sandbox_id: str) -> None:
        try:
            await self.provider.delete(sandbox_id)
        except SandboxError as error:
            log.warning(
                "sandbox could not be deleted; the reaper will retry", sandbox_id=sandbox_id, error=describe(error)
            )

    async def reap(self, *, now: float | None = None) -> ReapReport:
        """Delete idle sandboxes (unused for ``idle_ttl``; the thread gets a new one, restored
        from its snapshot, at its next run) and orphans (no thread metadata names them, and
        older than ``orphan_grace``)."""
        report = await reap(
            provider=self.provider, records=self.records, metadata=self.metadata, settings=self.settings, now=now
        )
        for thread_id, cached in list(self._cache.items()):
            if cached.backend.id in report.deleted:
                await self._evict(thread_id, revoke=True)
        return report

    async def reap_forever(self, interval: float) -> None:
        """Run :meth:`reap` every ``interval`` seconds until cancelled; errors are logged."""
        while True:
            try:
                report = await self.reap()
                if report.deleted:
                    log.info("reaped sandboxes", idle=report.idle, orphaned=report.orphaned)
            except (SandboxError, OSError) as error:
                log.warning("reaping failed", error=describe(error))
            await pause(interval)

    async def aclose(self) -> None:
        """Close the cached connections; the sandboxes keep running."""
        for thread_id in list(self._cache):
            cached = self._cache.pop(thread_id)
            await cached.backend.aclose()


class _Toucher:
    """Records a sandbox's use at most every 30 s, so a long run keeps its sandbox from the reaper."""

    def __init__(self, records: SandboxStore, sandbox_id: str) -> None:
        self._records = records
        self._sandbox_id = sandbox_id
        self._last = time.monotonic()

    async def __call__(self) -> None:
        if time.monotonic() - self._last >= _TOUCH_INTERVAL:
            self._last = time.monotonic()
            try:
                await self._records.touch(self._sandbox_id)
            except RedisError as error:
                log.warning("could not record the sandbox's use", sandbox_id=self._sandbox_id, error=describe(error))
