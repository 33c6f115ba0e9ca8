"""``SandboxManager.ensure_sandbox`` against real local sandboxes and the embedded Valkey: the
four cases of DESIGN.md section 4, the creation sentinel under races, failure counting, the
git identity, snapshot restore after recreation, and the reaper."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import timedelta

import pytest
from redis.asyncio import Redis

from drydock.bus import Bus
from drydock.config import SandboxSettings, Settings, SnapshotSettings
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.credentials import NoProxy, SandboxCredentials
from drydock.sandbox.errors import SandboxCreationFailed, SandboxUnavailable
from drydock.sandbox.handle import SandboxHandle
from drydock.sandbox.lifecycle import SandboxManager, SandboxSetupFailed, SnapshotRestorer
from drydock.sandbox.providers.local import LocalProvider
from drydock.sandbox.records import SandboxStore
from drydock.sandbox.sentinel import CreationSentinel
from drydock.sandbox.snapshots import SnapshotStore
from drydock.telemetry import REGISTRY
from drydock.threads.fields import SANDBOX_ID
from drydock.threads.metadata import ThreadMetadata, ThreadMetadataStore, ThreadNotFound
from tests.sandbox.grants import GrantLedger
from tests.waiting import eventually

ManagerFactory = Callable[..., SandboxManager]


class RecordingRestorer:
    """Marks each sandbox it restores into, so a test can see the restore ran on the new one."""

    def __init__(self, *, fail: bool = False) -> None:
        self.calls: list[tuple[str, str]] = []
        self.fail = fail

    async def restore(self, thread_id: str, sandbox: SandboxBackend) -> bool:
        self.calls.append((thread_id, sandbox.id))
        if self.fail:
            raise RuntimeError("the snapshot is damaged")
        await sandbox.aupload_files([("restored-marker", thread_id.encode())])
        return True


class SlowProvider(LocalProvider):
    """The local provider, with creation held back so that another process sees the sentinel."""

    delay = 1.0
    creations = 0

    async def create(self, thread_id: str, *, labels: Mapping[str, str] | None = None) -> SandboxHandle:
        self.creations += 1
        await asyncio.sleep(self.delay)
        return await super().create(thread_id, labels=labels)


@pytest.fixture
def ledger() -> GrantLedger:
    return GrantLedger()


@pytest.fixture
async def make_manager(
    local_provider: LocalProvider,
    records: SandboxStore,
    metadata: ThreadMetadataStore,
    redis: Redis,
    keys: Keys,
    sandbox_settings: SandboxSettings,
    ledger: GrantLedger,
) -> AsyncIterator[ManagerFactory]:
    """Builds managers as separate workers would: each with its own cache and owner id."""
    managers: list[SandboxManager] = []

    def make(
        *,
        provider: LocalProvider | None = None,
        snapshots: SnapshotRestorer | None = None,
        credentials: SandboxCredentials | None = None,
        settings: SandboxSettings | None = None,
    ) -> SandboxManager:
        manager = SandboxManager(
            provider=provider or local_provider,
            records=records,
            metadata=metadata,
            credentials=credentials or ledger,
            redis=redis,
            keys=keys,
            settings=settings or sandbox_settings,
            snapshots=snapshots,
        )
        managers.append(manager)
        return manager

    yield make
    for manager in managers:
        await manager.aclose()


async def sandbox_field(metadata: ThreadMetadataStore, thread_id: str) -> str | None:
    return (await metadata.get(thread_id)).sandbox_id


async def thread_sandboxes(records: SandboxStore, thread_id: str) -> list[str]:
    return [handle.id for handle in await records.all() if handle.thread_id == thread_id]


async def git_identity(backend: SandboxBackend) -> str:
    return (await backend.run("git config --global user.name; git config --global user.email")).output


async def kill_daemon(backend: SandboxBackend) -> None:
    """SIGKILL the daemon itself (the parent of the shell it runs), as a crash would."""
    with pytest.raises(SandboxUnavailable):
        await backend.run("kill -9 $PPID; sleep 5")


def _sample(name: str) -> float:
    return REGISTRY.get_sample_value(name, {"provider": "local"}) or 0


class TestEnsureSandbox:
    async def test_a_new_thread_gets_a_sandbox_with_grant_and_identity(
        self, make_manager: ManagerFactory, coder_thread: str, metadata: ThreadMetadataStore, ledger: GrantLedger
    ) -> None:
        backend = await make_manager().ensure_sandbox(coder_thread)
        assert await sandbox_field(metadata, coder_thread) == backend.id
        [grant] = ledger.issued
        assert (grant.sandbox_id, grant.role, grant.repository) == (backend.id, Role.CODER, "acme/widgets")
        inside = await backend.run('echo "$GH_TOKEN"; git config --get-regexp "^url\\..*insteadof$"')
        rule = grant.git_config[0][0].removesuffix("insteadOf") + "insteadof"
        assert inside.output == f"proxy-injected\n{rule} https://github.com/\n"
        assert await git_identity(backend) == "Drydock\ndrydock@users.noreply.github.com\n"

    async def test_a_cached_healthy_sandbox_is_reused_and_its_grant_refreshed(
        self, make_manager: ManagerFactory, coder_thread: str, records: SandboxStore, ledger: GrantLedger
    ) -> None:
        manager = make_manager()
        first = await manager.ensure_sandbox(coder_thread)
        second = await manager.ensure_sandbox(coder_thread)
        assert second is first
        assert ledger.refreshed == ledger.issued
        assert len(ledger.issued) == 1
        assert await thread_sandboxes(records, coder_thread) == [first.id]

    async def test_a_grant_that_cannot_be_refreshed_is_replaced(
        self, make_manager: ManagerFactory, coder_thread: str, ledger: GrantLedger
    ) -> None:
        manager = make_manager()
        backend = await manager.ensure_sandbox(coder_thread)
        ledger.refuse_refresh = True
        assert await manager.ensure_sandbox(coder_thread) is backend
        assert len(ledger.issued) == 2
        old, new = ledger.issued[0].token, ledger.issued[1].token
        assert old is not None
        assert new is not None
        rules = (await backend.run("git config --get-regexp '^url\\.'")).output
        assert new in rules
        assert old not in rules

    async def test_a_killed_daemon_is_detected_and_the_sandbox_recreated_and_restored(
        self,
        make_manager: ManagerFactory,
        coder_thread: str,
        metadata: ThreadMetadataStore,
        records: SandboxStore,
        ledger: GrantLedger,
    ) -> None:
        restorer = RecordingRestorer()
        manager = make_manager(snapshots=restorer)
        old = await manager.ensure_sandbox(coder_thread)
        await kill_daemon(old)
        new = await manager.ensure_sandbox(coder_thread)
        assert new.id != old.id
        assert await sandbox_field(metadata, coder_thread) == new.id
        assert await thread_sandboxes(records, coder_thread) == [new.id]
        assert restorer.calls[-1] == (coder_thread, new.id)
        assert (await new.run("cat restored-marker")).output == coder_thread
        assert ledger.revoked == [ledger.issued[0]]
        assert await git_identity(new) == "Drydock\ndrydock@users.noreply.github.com\n"

    async def test_a_daemon_that_stopped_answering_is_detected_at_the_health_timeout(
        self,
        make_manager: ManagerFactory,
        coder_thread: str,
        metadata: ThreadMetadataStore,
        sandbox_settings: SandboxSettings,
        ledger: GrantLedger,
    ) -> None:
        manager = make_manager(settings=sandbox_settings.model_copy(update={"health_timeout": timedelta(seconds=0.5)}))
        old = await manager.ensure_sandbox(coder_thread)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(old.run("kill -STOP $PPID; sleep 5"), timeout=1.0)
        # Far below the identity command's own limit (60 s to run, 30 s more to answer).
        async with asyncio.timeout(30):
            new = await manager.ensure_sandbox(coder_thread)
        assert new.id != old.id
        assert await sandbox_field(metadata, coder_thread) == new.id
        assert ledger.revoked == [ledger.issued[0]]

    async def test_a_command_a_healthy_daemon_refuses_fails_the_call_and_keeps_the_sandbox(
        self, make_manager: ManagerFactory, coder_thread: str, metadata: ThreadMetadataStore
    ) -> None:
        manager = make_manager()
        backend = await manager.ensure_sandbox(coder_thread)
        backend.environment = {**backend.environment, "NOT=A NAME": "x"}
        with pytest.raises(SandboxUnavailable, match="answered 400"):
            await manager.ensure_sandbox(coder_thread)
        assert await sandbox_field(metadata, coder_thread) == backend.id
        assert await manager.failures.count(coder_thread) == 1

    async def test_a_stale_sentinel_is_removed_and_a_sandbox_created(
        self, make_manager: ManagerFactory, coder_thread: str, metadata: ThreadMetadataStore
    ) -> None:
        sentinel = CreationSentinel.now("a-worker-that-died").encode()
        assert await metadata.compare_and_set(coder_thread, SANDBOX_ID, expected=None, new=sentinel)
        backend = await make_manager().ensure_sandbox(coder_thread)
        assert await sandbox_field(metadata, coder_thread) == backend.id

    async def test_a_sentinel_older_than_the_creation_timeout_is_stale_even_with_a_live_owner(
        self,
        make_manager: ManagerFactory,
        coder_thread: str,
        metadata: ThreadMetadataStore,
        redis: Redis,
        keys: Keys,
        sandbox_settings: SandboxSettings,
    ) -> None:
        settings = sandbox_settings.model_copy(update={"creation_timeout": timedelta(seconds=5)})
        old = CreationSentinel(owner="hung-worker", started_at=time.time() - 60)
        await redis.set(keys.sandbox_creator(coder_thread, "hung-worker"), "1", ex=60)
        assert await metadata.compare_and_set(coder_thread, SANDBOX_ID, expected=None, new=old.encode())
        backend = await make_manager(settings=settings).ensure_sandbox(coder_thread)
        assert await sandbox_field(metadata, coder_thread) == backend.id

    async def test_a_sentinel_whose_creator_is_alive_is_waited_for(
        self,
        make_manager: ManagerFactory,
        coder_thread: str,
        metadata: ThreadMetadataStore,
        records: SandboxStore,
        sandbox_settings: SandboxSettings,
    ) -> None:
        slow = SlowProvider(sandbox_settings, records)
        creator, waiter = make_manager(provider=slow), make_manager()
        creating = asyncio.create_task(creator.ensure_sandbox(coder_thread))

        async def creation_claimed() -> bool:
            field = await sandbox_field(metadata, coder_thread)
            return field is not None and CreationSentinel.parse(field) is not None

        await eventually(creation_claimed, every=0.01, what="the creation claimed")
        waited = await waiter.ensure_sandbox(coder_thread)
        created = await creating
        assert waited.id == created.id
        assert slow.creations == 1
        assert await thread_sandboxes(records, coder_thread) == [created.id]

    async def test_a_recorded_sandbox_is_reconnected_by_another_worker(
        self,
        make_manager: ManagerFactory,
        coder_thread: str,
        records: SandboxStore,
        ledger: GrantLedger,
    ) -> None:
        restorer = RecordingRestorer()
        first = await make_manager(snapshots=restorer).ensure_sandbox(coder_thread)
        await first.run("echo kept > work.txt")
        second = await make_manager(snapshots=restorer).ensure_sandbox(coder_thread)
        assert second.id == first.id
        assert second is not first
        assert (await second.run("cat work.txt")).output == "kept\n"
        assert await thread_sandboxes(records, coder_thread) == [first.id]
        assert [grant.sandbox_id for grant in ledger.issued] == [first.id, first.id]
        assert second.environment["GH_TOKEN"] == "proxy-injected"
        assert len(restorer.calls) == 1

    async def test_a_recorded_sandbox_that_is_gone_is_recreated(
        self, make_manager: ManagerFactory, coder_thread: str, metadata: ThreadMetadataStore, records: SandboxStore
    ) -> None:
        restorer = RecordingRestorer()
        first = await make_manager().ensure_sandbox(coder_thread)
        await kill_daemon(first)
        second = await make_manager(snapshots=restorer).ensure_sandbox(coder_thread)
        assert second.id != first.id
        assert await sandbox_field(metadata, coder_thread) == second.id
        assert await thread_sandboxes(records, coder_thread) == [second.id]
        assert restorer.calls == [(coder_thread, second.id)]

    async def test_a_recorded_sandbox_that_stopped_answering_is_recreated_and_its_connection_closed(
        self,
        make_manager: ManagerFactory,
        coder_thread: str,
        metadata: ThreadMetadataStore,
        sandbox_settings: SandboxSettings,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        stopped = await make_manager().ensure_sandbox(coder_thread)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(stopped.run("kill -STOP $PPID; sleep 5"), timeout=1.0)
        made: list[SandboxBackend] = []
        making = SandboxManager._backend

        def recorded(manager: SandboxManager, handle: SandboxHandle) -> SandboxBackend:
            made.append(making(manager, handle))
            return made[-1]

        monkeypatch.setattr(SandboxManager, "_backend", recorded)
        other_worker = make_manager(
            settings=sandbox_settings.model_copy(update={"health_timeout": timedelta(seconds=0.5)})
        )

        new = await other_worker.ensure_sandbox(coder_thread)

        assert new.id != stopped.id
        assert await sandbox_field(metadata, coder_thread) == new.id
        # Its health check opened a connection to the stopped daemon; closed when the sandbox was
        # given up, not left to the collector.
        [given_up] = [backend for backend in made if backend.id == stopped.id]
        assert given_up._session is None

    async def test_a_cached_sandbox_the_metadata_no_longer_names_is_dropped(
        self, make_manager: ManagerFactory, coder_thread: str, ledger: GrantLedger
    ) -> None:
        first_worker, second_worker = make_manager(), make_manager()
        stale = await first_worker.ensure_sandbox(coder_thread)
        await kill_daemon(stale)
        replacement = await second_worker.ensure_sandbox(coder_thread)
        again = await first_worker.ensure_sandbox(coder_thread)
        assert again.id == replacement.id != stale.id
        assert ledger.issued[0] in ledger.revoked

    async def test_the_callers_read_of_the_metadata_stands_for_the_first_read(
        self, make_manager: ManagerFactory, coder_thread: str, metadata: ThreadMetadataStore
    ) -> None:
        manager = make_manager()
        first = await manager.ensure_sandbox(coder_thread)
        read = await metadata.get(coder_thread)
        reads = 0
        original = manager.metadata.get

        async def counted(thread_id: str) -> ThreadMetadata:
            nonlocal reads
            reads += 1
            return await original(thread_id)

        manager.metadata.get = counted  # type: ignore[method-assign]
        assert await manager.ensure_sandbox(coder_thread, read=read) is first
        assert reads == 0

    async def test_a_read_the_sandbox_has_changed_since_is_corrected(
        self, make_manager: ManagerFactory, coder_thread: str, metadata: ThreadMetadataStore
    ) -> None:
        first_worker, second_worker = make_manager(), make_manager()
        stale = await first_worker.ensure_sandbox(coder_thread)
        read = await metadata.get(coder_thread)
        await kill_daemon(stale)
        replacement = await second_worker.ensure_sandbox(coder_thread)
        again = await first_worker.ensure_sandbox(coder_thread, read=read)
        assert again.id == replacement.id != stale.id
        assert await sandbox_field(metadata, coder_thread) == replacement.id

    async def test_the_git_identity_is_applied_again_on_every_ensure(
        self, make_manager: ManagerFactory, coder_thread: str
    ) -> None:
        manager = make_manager()
        backend = await manager.ensure_sandbox(coder_thread)
        await backend.run("git config --global --unset user.name; git config --global user.email someone@else")
        assert await git_identity(backend) == "someone@else\n"
        await manager.ensure_sandbox(coder_thread)
        assert await git_identity(backend) == "Drydock\ndrydock@users.noreply.github.com\n"
        await backend.run("rm -f ~/.gitconfig")
        reconnected = await make_manager().ensure_sandbox(coder_thread)
        assert await git_identity(reconnected) == "Drydock\ndrydock@users.noreply.github.com\n"

    async def test_failures_are_counted_per_thread_and_reset_on_success(
        self,
        make_manager: ManagerFactory,
        coder_thread: str,
        metadata: ThreadMetadataStore,
        records: SandboxStore,
        sandbox_settings: SandboxSettings,
    ) -> None:
        counted = _sample("drydock_sandbox_failures_total"), _sample("drydock_sandbox_create_seconds_count")
        broken = make_manager(provider=LocalProvider(sandbox_settings, records, python="/nonexistent/python3"))
        for attempt in (1, 2):
            with pytest.raises(SandboxCreationFailed):
                await broken.ensure_sandbox(coder_thread)
            assert await broken.failures.count(coder_thread) == attempt
            assert await sandbox_field(metadata, coder_thread) is None
        working = make_manager()
        await working.ensure_sandbox(coder_thread)
        assert await working.failures.count(coder_thread) == 0
        # On /metrics: the two failures, and the one sandbox created.
        assert (_sample("drydock_sandbox_failures_total"), _sample("drydock_sandbox_create_seconds_count")) == (
            counted[0] + 2,
            counted[1] + 1,
        )

    async def test_a_failed_restore_leaves_no_empty_sandbox_behind(
        self, make_manager: ManagerFactory, coder_thread: str, metadata: ThreadMetadataStore, records: SandboxStore
    ) -> None:
        manager = make_manager(snapshots=RecordingRestorer(fail=True))
        with pytest.raises(RuntimeError, match="damaged"):
            await manager.ensure_sandbox(coder_thread)
        assert await sandbox_field(metadata, coder_thread) is None
        assert await thread_sandboxes(records, coder_thread) == []

    async def test_setup_that_fails_inside_the_sandbox_is_a_clear_error(
        self, make_manager: ManagerFactory, coder_thread: str, sandbox_settings: SandboxSettings
    ) -> None:
        no_git = sandbox_settings.model_copy(update={"local_environment": {"PATH": "/nonexistent"}})
        provider = LocalProvider(no_git, make_manager().records)
        with pytest.raises(SandboxSetupFailed, match="credential grant"):
            await make_manager(provider=provider, settings=no_git).ensure_sandbox(coder_thread)
        assert await make_manager().failures.count(coder_thread) == 1

    async def test_a_thread_without_metadata_is_refused(self, make_manager: ManagerFactory) -> None:
        with pytest.raises(ThreadNotFound):
            await make_manager().ensure_sandbox(str(uuid.uuid4()))

    async def test_no_proxy_grants_nothing_and_says_so(self, make_manager: ManagerFactory, coder_thread: str) -> None:
        import structlog

        with structlog.testing.capture_logs() as logs:
            backend = await make_manager(credentials=NoProxy()).ensure_sandbox(coder_thread)
        assert backend.environment == {}
        assert any("no path to the credential proxy" in entry["event"] for entry in logs)


async def test_a_recreated_sandbox_gets_its_uncommitted_work_back_from_the_snapshot(
    make_manager: ManagerFactory, coder_thread: str, bus: Bus
) -> None:
    store = SnapshotStore(bus.js, SnapshotSettings())
    manager = make_manager(snapshots=store)
    old = await manager.ensure_sandbox(coder_thread)
    setup = await old.run(
        "git init -q -b main repo && cd repo && echo one > tracked.txt && git add . && git commit -q -m first "
        "&& echo two >> tracked.txt && echo new > untracked.txt"
    )
    assert setup.exit_code == 0, setup.output
    assert await store.save(coder_thread, old, repo_dir="repo") is not None
    await kill_daemon(old)
    new = await manager.ensure_sandbox(coder_thread)
    assert new.id != old.id
    restored = await new.run("cd repo && cat tracked.txt untracked.txt && git log --format=%s && git status --short")
    assert restored.output == "one\ntwo\nnew\nfirst\n M tracked.txt\n?? untracked.txt\n"


class TestReaper:
    async def test_an_idle_sandbox_is_deleted_and_its_thread_released(
        self,
        make_manager: ManagerFactory,
        coder_thread: str,
        metadata: ThreadMetadataStore,
        records: SandboxStore,
        sandbox_settings: SandboxSettings,
    ) -> None:
        manager = make_manager()
        backend = await manager.ensure_sandbox(coder_thread)
        await records.touch(backend.id, at=time.time() - sandbox_settings.idle_ttl.total_seconds() - 1)
        report = await manager.reap()
        assert (report.idle, report.orphaned) == ([backend.id], [])
        assert await sandbox_field(metadata, coder_thread) is None
        assert await records.get(backend.id) is None
        fresh = await manager.ensure_sandbox(coder_thread)
        assert fresh.id != backend.id

    async def test_orphans_are_deleted_after_the_grace_period_and_used_sandboxes_kept(
        self,
        make_manager: ManagerFactory,
        coder_thread: str,
        local_provider: LocalProvider,
        records: SandboxStore,
        sandbox_settings: SandboxSettings,
    ) -> None:
        manager = make_manager()
        used = await manager.ensure_sandbox(coder_thread)
        without_thread = await local_provider.create(str(uuid.uuid4()))
        not_named = await local_provider.create(coder_thread)
        assert (await manager.reap()).deleted == set()
        later = time.time() + sandbox_settings.orphan_grace.total_seconds() + 1
        report = await manager.reap(now=later)
        assert sorted(report.orphaned) == sorted([without_thread.id, not_named.id])
        assert report.idle == []
        assert [handle.id for handle in await local_provider.list()] == [used.id]
        assert await used.is_healthy()


async def test_two_worker_processes_racing_for_one_thread_create_exactly_one_sandbox(
    settings: Settings,
    keys: Keys,
    redis: Redis,
    coder_thread: str,
    sandbox_settings: SandboxSettings,
    records: SandboxStore,
    local_provider: LocalProvider,
    crypto_key: str,
) -> None:
    assert settings.redis.url is not None
    go = f"{keys.prefix}:go"
    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.sandbox.race_worker",
            settings.redis.url,
            keys.prefix,
            coder_thread,
            sandbox_settings.model_dump_json(),
            go,
            crypto_key,
            stdout=asyncio.subprocess.PIPE,
        )
        for _ in range(2)
    ]
    deadline = time.monotonic() + 60
    while await redis.llen(f"{go}:ready") < 2:
        assert time.monotonic() < deadline, "the workers did not start"
        await asyncio.sleep(0.05)
    await redis.rpush(go, "go", "go")
    outputs = [await worker.communicate() for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0]
    results = [json.loads(out.decode().strip().splitlines()[-1]) for out, _ in outputs]
    assert results[0]["sandbox_id"] == results[1]["sandbox_id"]
    assert results[0]["creations"] + results[1]["creations"] == 1
    assert await thread_sandboxes(records, coder_thread) == [results[0]["sandbox_id"]]
