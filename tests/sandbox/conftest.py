"""Fixtures for the sandbox tests: a session directory for local sandboxes, and a final check
that no sandbox process outlives the test session."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from redis.asyncio import Redis

from drydock.config import SandboxSettings
from drydock.infra.redis import Keys
from drydock.infra.server_keys import ServerKeys
from drydock.roles import Role
from drydock.sandbox.providers.local import LocalProvider
from drydock.sandbox.records import SandboxRecords
from drydock.threads.metadata import ThreadMetadataStore


def _processes_under(root: Path) -> set[int]:
    """Processes whose command line names ``root``, and all their descendants."""
    marker = str(root).encode()
    parents: dict[int, int] = {}
    found: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] == "Z":
            continue
        parents[int(name)] = int(fields[1])
        if marker in cmdline:
            found.add(int(name))
    grew = True
    while grew:
        children = {pid for pid, parent in parents.items() if parent in found} - found
        found |= children
        grew = bool(children)
    return found


@pytest.fixture(scope="session")
def sandbox_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Where every local sandbox of the session lives; at the end no process may remain."""
    root = tmp_path_factory.mktemp("sandboxes")
    yield root
    survivors = _processes_under(root)
    for pid in survivors:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
    assert not survivors, f"sandbox processes outlived the tests: {sorted(survivors)}"


@pytest.fixture
def sandbox_settings(sandbox_root: Path) -> SandboxSettings:
    return SandboxSettings(
        local_root=str(sandbox_root),
        creator_heartbeat=timedelta(seconds=2),
        creation_timeout=timedelta(seconds=30),
        ready_timeout=timedelta(seconds=30),
        exec_timeout=timedelta(seconds=30),
    )


@pytest.fixture
def records(redis: Redis, keys: Keys, server_keys: ServerKeys) -> SandboxRecords:
    return SandboxRecords(redis, keys, server_keys)


@pytest.fixture
async def local_provider(sandbox_settings: SandboxSettings, records: SandboxRecords) -> AsyncIterator[LocalProvider]:
    """A local provider whose sandboxes are all deleted after the test."""
    provider = LocalProvider(sandbox_settings, records)
    yield provider
    for handle in await provider.list():
        await provider.delete(handle.id)
    await provider.aclose()


@pytest.fixture
def metadata(redis: Redis, keys: Keys) -> ThreadMetadataStore:
    return ThreadMetadataStore(redis, keys)


@pytest.fixture
async def coder_thread(metadata: ThreadMetadataStore, thread_id: str) -> str:
    await metadata.create(thread_id, kind=Role.CODER, fields={"repository": "acme/widgets"})
    return thread_id
