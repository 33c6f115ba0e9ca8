"""The local provider: the provider contract, plus what only a local process sandbox has."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import structlog
from redis.asyncio import Redis

from drydock.config import CredentialProxySettings, SandboxSettings, Settings
from drydock.infra.redis import Keys
from drydock.infra.server_keys import ServerKeys
from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.errors import SandboxCreationFailed
from drydock.sandbox.handle import Isolation
from drydock.sandbox.providers.local import DIRECTORY_LABEL, PID_LABEL, LocalProvider
from drydock.sandbox.reaper import reap
from drydock.sandbox.records import SandboxStore
from drydock.threads.metadata import ThreadMetadataStore
from tests.sandbox.conftest import own_root
from tests.sandbox.provider_contract import ProviderContract
from tests.waiting import eventually


class TestLocalProviderUnisolated(ProviderContract):
    """The contract on a plain host process (what ``local_allow_unisolated`` accepts for development)."""

    bubblewrap = False

    @pytest.fixture(scope="class")
    @classmethod
    def class_records(cls, redis: Redis, server_keys: ServerKeys) -> SandboxStore:
        return SandboxStore(redis, Keys(prefix=f"test-{uuid.uuid4().hex[:8]}"), server_keys)

    @pytest.fixture(scope="class")
    @classmethod
    def class_root(cls, sandbox_root: Path) -> Path:
        return own_root(sandbox_root)

    @pytest.fixture(scope="class")
    @classmethod
    async def provider(cls, class_root: Path, class_records: SandboxStore) -> AsyncIterator[LocalProvider]:
        settings = SandboxSettings(
            local_root=str(class_root), local_bubblewrap=cls.bubblewrap, local_allow_unisolated=not cls.bubblewrap
        )
        provider = LocalProvider(settings, class_records)
        assert provider.isolation == (Isolation.BUBBLEWRAP if cls.bubblewrap else Isolation.NONE)
        yield provider
        for handle in await provider.list():
            await provider.delete(handle.id)

    @pytest.fixture(scope="class")
    @classmethod
    def other_provider(cls, class_root: Path, class_records: SandboxStore) -> LocalProvider:
        settings = SandboxSettings(
            local_root=str(class_root), local_bubblewrap=cls.bubblewrap, local_allow_unisolated=not cls.bubblewrap
        )
        return LocalProvider(settings, class_records)


@pytest.mark.usefixtures("bwrap")
class TestLocalProviderBubblewrap(TestLocalProviderUnisolated):
    """The contract inside bubblewrap."""

    bubblewrap = True


def _read(path: str) -> bytes:
    return Path(path).read_bytes()


def _exists(path: str) -> bool:
    return Path(path).exists()


def _entries(directory: Path) -> set[Path]:
    return set(directory.iterdir())


def _processes_with_environment(entry: bytes) -> set[int]:
    found = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                environ = Path(f"/proc/{name}/environ").read_bytes()
                state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if entry in environ.split(b"\0") and state != "Z":
                found.add(int(name))
    return found


async def test_sandbox_environment_is_built_from_the_allowlist_only(
    local_provider: LocalProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRYDOCK_TEST_HOST_SECRET", "hunter2")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_realtoken")
    handle = await local_provider.create(str(uuid.uuid4()))
    sandbox = SandboxBackend(handle)
    names = (await sandbox.run("env -0 | cut -z -d= -f1 | tr '\\0' ' '")).output.split()
    assert set(names) - {"PWD", "SHLVL", "_", "OLDPWD"} == {"PATH", "LANG", "HOME", "TMPDIR", "DRYDOCK_SANDBOX_ID"}
    everything = (await sandbox.run("env; cat /proc/$PPID/environ /proc/$PPID/cmdline | tr '\\0' ' '")).output
    for secret in ("hunter2", "ghs_realtoken", handle.token):
        assert secret not in everything
    daemon = int(handle.labels[PID_LABEL])
    assert handle.token.encode() not in _read(f"/proc/{daemon}/environ")
    assert handle.token.encode() not in _read(f"/proc/{daemon}/cmdline")
    await sandbox.aclose()


class TestAnUnisolatedSandbox:
    async def test_is_refused_when_bubblewrap_is_missing(
        self,
        sandbox_settings: SandboxSettings,
        records: SandboxStore,
        monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path,
    ) -> None:
        monkeypatch.setenv("PATH", str(tmp_path))
        provider = LocalProvider(sandbox_settings, records)
        with pytest.raises(SandboxCreationFailed) as refused:
            await provider.create(str(uuid.uuid4()))
        message = str(refused.value)
        assert "\n" not in message
        for part in ("bwrap", "the package bubblewrap", "Debian", "DRYDOCK_SANDBOX_LOCAL_ALLOW_UNISOLATED=true"):
            assert part in message
        assert await records.all() == []

    async def test_is_refused_when_bubblewrap_is_off(
        self, sandbox_settings: SandboxSettings, records: SandboxStore
    ) -> None:
        provider = LocalProvider(sandbox_settings.model_copy(update={"local_bubblewrap": False}), records)
        with pytest.raises(SandboxCreationFailed, match=r"LOCAL_BUBBLEWRAP is off.*LOCAL_ALLOW_UNISOLATED=true"):
            await provider.create(str(uuid.uuid4()))
        assert await records.all() == []

    async def test_is_refused_when_the_proxy_is_not_on_loopback(
        self, bwrap: str, sandbox_settings: SandboxSettings, records: SandboxStore
    ) -> None:
        proxy = CredentialProxySettings(url="http://proxy.internal:8081")
        provider = LocalProvider(sandbox_settings, records, proxy=proxy)
        with pytest.raises(SandboxCreationFailed, match=r"proxy\.internal:8081 is not a loopback address"):
            await provider.create(str(uuid.uuid4()))


async def test_an_accepted_unisolated_sandbox_is_reported(
    sandbox_settings: SandboxSettings, records: SandboxStore
) -> None:
    provider = LocalProvider(
        sandbox_settings.model_copy(update={"local_bubblewrap": False, "local_allow_unisolated": True}), records
    )
    with structlog.testing.capture_logs() as logs:
        handle = await provider.create(str(uuid.uuid4()))
    try:
        assert handle.isolation == Isolation.NONE
        warnings = [entry for entry in logs if entry["log_level"] == "warning" and entry.get("sandbox_id") == handle.id]
        assert warnings
        assert "not isolated" in warnings[0]["event"]
        assert handle.workspace == str(Path(handle.labels[DIRECTORY_LABEL]) / "workspace")
        # Its reaper finds an orphaned daemon by its environment, which a non-dumpable one hides.
        cmdline = (await asyncio.to_thread(Path(f"/proc/{handle.labels[PID_LABEL]}/cmdline").read_bytes)).split(b"\0")
        assert b"--dumpable" in cmdline
    finally:
        await provider.delete(handle.id)


async def test_bubblewrap_hides_the_host(
    bwrap: str, sandbox_settings: SandboxSettings, records: SandboxStore, tmp_path: Path
) -> None:
    host_file = tmp_path / "host-only.txt"
    host_file.write_text("host")
    provider = LocalProvider(sandbox_settings, records)
    handle = await provider.create(str(uuid.uuid4()))
    sandbox = SandboxBackend(handle)
    try:
        assert (handle.isolation, handle.workspace) == (Isolation.BUBBLEWRAP, "/workspace")
        probe = await sandbox.run(
            f"test -e {host_file} && echo host-file-visible; test -e /proc/{os.getpid()} && echo host-pid-visible; "
            f"test -e {handle.labels[DIRECTORY_LABEL]} && echo sandbox-root-visible; hostname; echo $HOME; "
            "touch /usr/drydock-probe 2>/dev/null && echo usr-writable; test -e /etc/shadow && echo shadow-visible; "
            "grep CapEff /proc/self/status; git --version >/dev/null && python3 -c 'print(\"tools work\")'; echo done"
        )
        assert probe.output == "sandbox\n/home/sandbox\nCapEff:\t0000000000000000\ntools work\ndone\n"
    finally:
        await sandbox.aclose()
        await provider.delete(handle.id)


async def test_a_sandbox_outlives_the_process_that_created_it(
    local_provider: LocalProvider, settings: Settings, keys: Keys, sandbox_settings: SandboxSettings, crypto_key: str
) -> None:
    """The worker process exits after creating the sandbox; the daemon keeps serving, like a pod."""
    script = (
        "import asyncio, sys\n"
        "from drydock.config import SandboxSettings\n"
        "from drydock.infra.redis import Keys\n"
        "from drydock.infra.server_keys import ServerKeys\n"
        "from drydock.sandbox.providers.local import LocalProvider\n"
        "from drydock.sandbox.records import SandboxStore\n"
        "from redis.asyncio import Redis\n"
        "async def main():\n"
        "    redis = Redis.from_url(sys.argv[1], decode_responses=True)\n"
        "    settings = SandboxSettings.model_validate_json(sys.argv[3])\n"
        "    provider = LocalProvider(settings, SandboxStore(redis, Keys(sys.argv[2]), ServerKeys([sys.argv[4]])))\n"
        "    print((await provider.create('outliving')).id)\n"
        "    await redis.aclose()\n"
        "asyncio.run(main())\n"
    )
    assert settings.redis.url is not None
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        settings.redis.url,
        keys.prefix,
        sandbox_settings.model_dump_json(),
        crypto_key,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await worker.communicate()
    assert worker.returncode == 0
    handle = await local_provider.connect(out.decode().split()[-1])
    sandbox = SandboxBackend(handle)
    assert (await sandbox.run("echo still here")).output == "still here\n"
    await sandbox.aclose()
    assert await local_provider.delete(handle.id)


async def test_delete_kills_every_process_even_after_the_daemon_was_killed(local_provider: LocalProvider) -> None:
    handle = await local_provider.create(str(uuid.uuid4()))
    sandbox = SandboxBackend(handle)
    started = await sandbox.run("nohup sleep 300 >/dev/null 2>&1 & echo started")
    assert started.output == "started\n"
    marker = f"DRYDOCK_SANDBOX_ID={handle.id}".encode()
    assert len(_processes_with_environment(marker)) >= 1
    os.kill(int(handle.labels[PID_LABEL]), signal.SIGKILL)
    await sandbox.aclose()
    assert await local_provider.delete(handle.id)
    await eventually(lambda: not _processes_with_environment(marker), what="the sandbox's processes gone")
    assert not _exists(handle.labels[DIRECTORY_LABEL])


async def test_a_daemon_that_cannot_start_leaves_nothing_behind(
    sandbox_settings: SandboxSettings, records: SandboxStore, sandbox_root: Path
) -> None:
    before = _entries(sandbox_root)
    provider = LocalProvider(sandbox_settings, records, python="/nonexistent/python3")
    with pytest.raises(SandboxCreationFailed):
        await provider.create(str(uuid.uuid4()))
    assert await records.all() == []
    assert _entries(sandbox_root) == before


async def test_reserved_labels_are_refused(local_provider: LocalProvider) -> None:
    with pytest.raises(ValueError, match="pid"):
        await local_provider.create("t", labels={"pid": "1"})


def test_handle_record_round_trip_keeps_every_field(local_provider: LocalProvider) -> None:
    from datetime import UTC, datetime

    from drydock.sandbox.handle import SandboxHandle

    handle = SandboxHandle(
        id="sbx-1",
        provider="local",
        thread_id="t",
        base_url="http://127.0.0.1:1",
        token="secret",
        workspace="/workspace",
        created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        isolation=Isolation.NONE,
        labels={"a": "b"},
    )
    assert SandboxHandle.from_record(handle.to_record(), token="secret") == handle
    assert "secret" not in repr(handle)
    assert "secret" not in json.dumps(handle.to_record())
    with pytest.raises(ValueError, match="workspace"):
        SandboxHandle.from_record({k: v for k, v in handle.to_record().items() if k != "workspace"}, token="secret")
    assert json.loads(handle.to_record()["labels"]) == {"a": "b"}


async def _gone(marker: bytes, within: float = 10.0) -> bool:
    deadline = asyncio.get_running_loop().time() + within
    while _processes_with_environment(marker):
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


class TestWithoutRecords:
    """A store that lost the records (restarted empty) must not leave sandboxes running forever:
    the reaper finds them in the root, by directory or by process, and deletes them."""

    async def _sandbox_with_a_child(self, provider: LocalProvider) -> tuple[str, bytes]:
        handle = await provider.create(str(uuid.uuid4()))
        sandbox = SandboxBackend(handle)
        assert (await sandbox.run("nohup sleep 300 >/dev/null 2>&1 & echo started")).output == "started\n"
        await sandbox.aclose()
        return handle.id, f"DRYDOCK_SANDBOX_ID={handle.id}".encode()

    async def test_the_reaper_deletes_a_sandbox_whose_record_is_gone(
        self,
        local_provider: LocalProvider,
        records: SandboxStore,
        metadata: ThreadMetadataStore,
        sandbox_settings: SandboxSettings,
    ) -> None:
        sandbox_id, marker = await self._sandbox_with_a_child(local_provider)
        await records.remove(sandbox_id)
        (listed,) = await local_provider.list()
        assert (listed.id, listed.thread_id) == (sandbox_id, "")
        report = await reap(provider=local_provider, records=records, metadata=metadata, settings=sandbox_settings)
        assert report.deleted == set(), "within the grace a creation may still be in flight"
        later = time.time() + sandbox_settings.orphan_grace.total_seconds() + 1
        report = await reap(
            provider=local_provider, records=records, metadata=metadata, settings=sandbox_settings, now=later
        )
        assert report.orphaned == [sandbox_id]
        assert await _gone(marker)
        assert not (local_provider.root / sandbox_id).exists()
        assert await local_provider.list() == []

    async def test_processes_whose_directory_and_record_are_gone_are_killed(
        self, local_provider: LocalProvider, records: SandboxStore
    ) -> None:
        sandbox_id, marker = await self._sandbox_with_a_child(local_provider)
        await records.remove(sandbox_id)
        shutil.rmtree(local_provider.root / sandbox_id)
        assert [handle.id for handle in await local_provider.list()] == [sandbox_id]
        assert await local_provider.delete(sandbox_id)
        assert await _gone(marker)
        assert await local_provider.delete(sandbox_id) is False

    async def test_another_roots_sandboxes_are_left_alone(
        self, local_provider: LocalProvider, records: SandboxStore, sandbox_root: Path
    ) -> None:
        settings = SandboxSettings(
            local_root=str(own_root(sandbox_root)), local_bubblewrap=False, local_allow_unisolated=True
        )
        other = LocalProvider(settings, records)
        sandbox_id, marker = await self._sandbox_with_a_child(other)
        try:
            await records.remove(sandbox_id)
            assert await local_provider.list() == []
            assert await local_provider.delete(sandbox_id) is False
            assert _processes_with_environment(marker)
        finally:
            assert await other.delete(sandbox_id)
            assert await _gone(marker)
