"""The local provider: the provider contract, plus what only a local process sandbox has."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import structlog
from redis.asyncio import Redis

from drydock.config import SandboxSettings, Settings
from drydock.infra.redis import Keys
from drydock.infra.server_keys import ServerKeys
from drydock.sandbox.backend import SandboxBackend
from drydock.sandbox.errors import SandboxCreationFailed
from drydock.sandbox.handle import Isolation
from drydock.sandbox.providers.local import DIRECTORY_LABEL, PID_LABEL, LocalProvider
from drydock.sandbox.records import SandboxRecords
from tests.sandbox.provider_contract import ProviderContract

requires_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed here")


class TestLocalProviderUnisolated(ProviderContract):
    """The contract on a plain host process (what a machine without bubblewrap gets)."""

    bubblewrap = False

    @pytest.fixture(scope="class")
    @classmethod
    def class_records(cls, redis: Redis, server_keys: ServerKeys) -> SandboxRecords:
        return SandboxRecords(redis, Keys(prefix=f"test-{uuid.uuid4().hex[:8]}"), server_keys)

    @pytest.fixture(scope="class")
    @classmethod
    async def provider(cls, sandbox_root: Path, class_records: SandboxRecords) -> AsyncIterator[LocalProvider]:
        settings = SandboxSettings(local_root=str(sandbox_root), local_bubblewrap=cls.bubblewrap)
        provider = LocalProvider(settings, class_records)
        assert provider.isolation == (Isolation.BUBBLEWRAP if cls.bubblewrap else Isolation.NONE)
        yield provider
        for handle in await provider.list():
            await provider.delete(handle.id)

    @pytest.fixture(scope="class")
    @classmethod
    def other_provider(cls, sandbox_root: Path, class_records: SandboxRecords) -> LocalProvider:
        settings = SandboxSettings(local_root=str(sandbox_root), local_bubblewrap=cls.bubblewrap)
        return LocalProvider(settings, class_records)


@requires_bwrap
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


async def test_an_unisolated_sandbox_is_reported(sandbox_settings: SandboxSettings, records: SandboxRecords) -> None:
    provider = LocalProvider(sandbox_settings.model_copy(update={"local_bubblewrap": False}), records)
    with structlog.testing.capture_logs() as logs:
        handle = await provider.create(str(uuid.uuid4()))
    try:
        assert handle.isolation == Isolation.NONE
        warnings = [entry for entry in logs if entry["log_level"] == "warning" and entry.get("sandbox_id") == handle.id]
        assert warnings
        assert "not isolated" in warnings[0]["event"]
        assert handle.workspace == str(Path(handle.labels[DIRECTORY_LABEL]) / "workspace")
    finally:
        await provider.delete(handle.id)


@requires_bwrap
async def test_bubblewrap_hides_the_host(
    sandbox_settings: SandboxSettings, records: SandboxRecords, tmp_path: Path
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
        "from drydock.sandbox.records import SandboxRecords\n"
        "from redis.asyncio import Redis\n"
        "async def main():\n"
        "    redis = Redis.from_url(sys.argv[1], decode_responses=True)\n"
        "    settings = SandboxSettings.model_validate_json(sys.argv[3])\n"
        "    provider = LocalProvider(settings, SandboxRecords(redis, Keys(sys.argv[2]), ServerKeys([sys.argv[4]])))\n"
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
    for _ in range(50):
        if not _processes_with_environment(marker):
            break
        await asyncio.sleep(0.02)
    assert not _processes_with_environment(marker)
    assert not _exists(handle.labels[DIRECTORY_LABEL])


async def test_a_daemon_that_cannot_start_leaves_nothing_behind(
    sandbox_settings: SandboxSettings, records: SandboxRecords, sandbox_root: Path
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
