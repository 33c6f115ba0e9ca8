"""Fixtures for the sandbox tests: a session directory for local sandboxes, a final check that
no sandbox process outlives the test session, ``bwrap`` for the isolation tests, and
:func:`loopback_service_as_proxy` for tests whose sandboxes need a loopback service."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from redis.asyncio import Redis

from drydock.config import CredentialProxySettings, SandboxSettings
from drydock.infra.redis import Keys
from drydock.infra.server_keys import ServerKeys
from drydock.roles import Role
from drydock.sandbox.providers.local import LocalProvider
from drydock.sandbox.proxy_sockets import REVERSE_SOCKET, prepare_socket_directory
from drydock.sandbox.records import SandboxStore
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


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()


@contextlib.asynccontextmanager
async def loopback_service_as_proxy(port: int, directory: Path) -> AsyncIterator[CredentialProxySettings]:
    """Proxy settings under which a local sandbox reaches the host's ``127.0.0.1:port`` at the same
    address: its relay goes to a Unix socket in ``directory`` that this forwards to the port. Only
    for tests whose subject is not the credential proxy (a sandbox reaches nothing else)."""

    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            await asyncio.gather(_pump(reader, upstream_writer), _pump(upstream_reader, writer))
        finally:
            upstream_writer.close()
            writer.close()

    prepare_socket_directory(directory)
    server = await asyncio.start_unix_server(forward, path=str(directory / REVERSE_SOCKET))
    try:
        yield CredentialProxySettings(url=f"http://127.0.0.1:{port}", socket_dir=str(directory))
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture(scope="session")
def bwrap() -> str:
    """bubblewrap's path. Where it is missing an isolation test skips, except under CI
    (``CI=true``, where ``.ci/run`` installs it): there the test fails."""
    path = shutil.which("bwrap")
    if path is None:
        reason = "bubblewrap (bwrap) is not installed: apt-get install -y bubblewrap"
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"{reason} (under CI an isolation test must run, not skip)")
        pytest.skip(reason)
    return path


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


def own_root(sandbox_root: Path) -> Path:
    """A root of its own under the session's: a provider takes every sandbox in its root
    without a record (under its key prefix) for an orphan."""
    root = sandbox_root / uuid.uuid4().hex[:8]
    root.mkdir()
    return root


@pytest.fixture
def sandbox_settings(sandbox_root: Path) -> SandboxSettings:
    return SandboxSettings(
        local_root=str(own_root(sandbox_root)),
        creator_heartbeat=timedelta(seconds=2),
        creation_timeout=timedelta(seconds=30),
        ready_timeout=timedelta(seconds=30),
        exec_timeout=timedelta(seconds=30),
    )


@pytest.fixture
def records(redis: Redis, keys: Keys, server_keys: ServerKeys) -> SandboxStore:
    return SandboxStore(redis, keys, server_keys)


@pytest.fixture
async def local_provider(
    bwrap: str, sandbox_settings: SandboxSettings, records: SandboxStore
) -> AsyncIterator[LocalProvider]:
    """A local (bubblewrap) provider whose sandboxes are all deleted after the test."""
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
