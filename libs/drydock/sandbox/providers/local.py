"""The ``local`` provider: each sandbox is a daemon process on this host with a directory of its own.

Layout: ``<local_root>/<sandbox id>/`` (mode 0700) holds ``workspace/``, ``home/``, ``tmp/`` and
``daemon.log``. The daemon serves on a loopback socket that the provider binds and hands over,
so it accepts connections before it has even started, and readiness is the first health answer.

Lifetime: the daemon runs in a session of its own and outlives the worker that started it, as a
pod would; another worker on the same host reconnects by id through the Redis record, and only
:meth:`LocalProvider.delete` (or the reaper) stops it, killing every process of the sandbox.

Records lost (a store restarted empty, a worker killed between creating and recording):
:meth:`LocalProvider.list` also returns the sandboxes of its root that have no record, found by
their directories ``<local_root>/sbx-*`` and by the processes whose environment carries
``DRYDOCK_SANDBOX_ID`` and whose command line names such a directory, so the reaper deletes
them; a root belongs to one installation.

Environment: exactly ``local_environment`` from the settings plus ``HOME``, ``TMPDIR`` and
``DRYDOCK_SANDBOX_ID``. Nothing is copied from the host's environment, so no host secret leaks
into a sandbox through it.

Isolation: the daemon runs inside bubblewrap (see :mod:`drydock.sandbox.providers.bubblewrap`),
the workspace is ``/workspace`` and the sandbox has a network namespace of its own. The only
thing it reaches is the credential proxy: the daemon relays the proxy URLs' loopback addresses
inside the namespace to the proxy's Unix sockets (:mod:`drydock.sandbox.proxy_sockets`), so
the proxy must run on the same host and its URLs must name a loopback address.

Without ``bwrap`` on PATH (or with ``local_bubblewrap`` off), creation is refused unless
``local_allow_unisolated`` accepts a plain host process for development: commands then see the
host's filesystem and network and run as the worker's user, which is logged as a warning for
every sandbox and reported on the handle as ``isolation="none"``.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import ipaddress
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import structlog

import drydock
from drydock.config import CredentialProxySettings, SandboxSettings
from drydock.sandbox.daemon.relay import Relay
from drydock.sandbox.daemon_http import daemon_client, health_status
from drydock.sandbox.errors import SandboxCreationFailed, SandboxNotFound
from drydock.sandbox.handle import Isolation, SandboxHandle
from drydock.sandbox.providers import bubblewrap
from drydock.sandbox.providers.local_processes import is_running, kill_sandbox, sandbox_ids_running_in, spawn_daemon
from drydock.sandbox.proxy_sockets import (
    EGRESS_SOCKET,
    REVERSE_SOCKET,
    prepare_socket_directory,
    socket_directory,
)
from drydock.sandbox.records import SandboxStore

log = structlog.get_logger(__name__)

PID_LABEL = "pid"
DIRECTORY_LABEL = "directory"
HOST_LABEL = "host"
SANDBOX_ID_VARIABLE = "DRYDOCK_SANDBOX_ID"
_RESERVED_LABELS = frozenset({PID_LABEL, DIRECTORY_LABEL, HOST_LABEL})
_SANDBOX_ID = re.compile(r"^sbx-[0-9a-f]{32}$")


def default_root() -> Path:
    return Path(tempfile.gettempdir()) / "drydock-sandboxes"


def _loopback_addresses(url: str) -> list[tuple[str, int]]:
    """Where a sandbox's relay listens for ``url``; :class:`ValueError` when it is not loopback."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if host == "localhost":
        return [("127.0.0.1", port), ("::1", port)]
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(
            f"{url} is not a loopback address: a local sandbox reaches the credential proxy only through "
            "its Unix sockets on this host (DRYDOCK_PROXY_URL and DRYDOCK_PROXY_EGRESS_URL must name "
            "127.0.0.1, ::1 or localhost)"
        )
    return [(host, port)]


def _relays(proxy: CredentialProxySettings) -> list[Relay]:
    inside = Path(bubblewrap.PROXY_SOCKETS)
    return [
        Relay(host, port, inside / name)
        for url, name in ((proxy.url, REVERSE_SOCKET), (proxy.egress_url, EGRESS_SOCKET))
        for host, port in _loopback_addresses(url)
    ]


def _refusal(settings: SandboxSettings, bwrap: str | None) -> str | None:
    """Why this provider must not create sandboxes (no isolation and none accepted), or None."""
    if bwrap is not None or settings.local_allow_unisolated:
        return None
    missing = (
        "bubblewrap (bwrap) is not on PATH: install the package bubblewrap (Debian, Ubuntu, Fedora, Arch)"
        if settings.local_bubblewrap
        else "DRYDOCK_SANDBOX_LOCAL_BUBBLEWRAP is off"
    )
    return (
        f"refusing to create an unisolated local sandbox: {missing}, or set "
        "DRYDOCK_SANDBOX_LOCAL_ALLOW_UNISOLATED=true to run sandboxes as this user on the host (development only)"
    )


class LocalProvider:
    """Sandboxes as local daemon processes; see the module documentation."""

    name = "local"
    reaches_credential_proxy = True

    def __init__(
        self,
        settings: SandboxSettings,
        records: SandboxStore,
        *,
        proxy: CredentialProxySettings | None = None,
        python: str | None = None,
    ) -> None:
        """``proxy``: the credential proxy the sandboxes reach (unset: its default settings)."""
        self._settings = settings
        self._records = records
        self._python = python or sys.executable
        self.root = Path(settings.local_root) if settings.local_root else default_root()
        self.bwrap = shutil.which("bwrap") if settings.local_bubblewrap else None
        self.isolation = Isolation.BUBBLEWRAP if self.bwrap else Isolation.NONE
        proxy = proxy or CredentialProxySettings()
        self.proxy_sockets = socket_directory(proxy)
        self._refusal = _refusal(settings, self.bwrap)
        self._relays: Sequence[Relay] = ()
        if self.bwrap is not None:
            try:
                self._relays = _relays(proxy)
            except ValueError as error:
                self._refusal = f"refusing to create a local sandbox: {error}"
        self._host = socket.gethostname()
        # Only so that this process reaps the daemons it started; the truth is the Redis record.
        self._children: dict[str, subprocess.Popen[bytes]] = {}

    def _daemon_argv(self, *, workspace: str, tmp: str, listen_fd: int) -> list[str]:
        s = self._settings
        relays = [argument for relay in self._relays for argument in ("--relay", relay.argument())]
        return [
            self._python,
            "-I",
            "-m",
            "drydock.sandbox.daemon",
            "--workspace",
            workspace,
            "--root",
            tmp,
            "--listen-fd",
            str(listen_fd),
            "--default-timeout",
            str(s.exec_timeout.total_seconds()),
            "--max-timeout",
            str(s.max_exec_timeout.total_seconds()),
            "--output-cap",
            str(s.output_cap),
            "--max-concurrent-execs",
            str(s.max_concurrent_execs),
            "--max-queued-execs",
            str(s.max_queued_execs),
            *relays,
            # Unisolated, its commands reach all the host user's processes anyway, and the reaper
            # finds an orphaned daemon by its environment, which a non-dumpable one hides.
            *(["--dumpable"] if self.bwrap is None else []),
        ]

    def _command(self, directory: Path, listen_fd: int) -> tuple[list[str], dict[str, str], str]:
        """The argv, the environment and the workspace path as the sandbox sees it."""
        workspace, home, tmp = directory / "workspace", directory / "home", directory / "tmp"
        if self.bwrap is None:
            inside_workspace, inside_home, inside_tmp = str(workspace), str(home), str(tmp)
            prefix: list[str] = []
        else:
            inside_workspace, inside_home, inside_tmp = bubblewrap.WORKSPACE, bubblewrap.HOME, bubblewrap.TMP
            prefix = bubblewrap.bubblewrap_argv(
                self.bwrap,
                workspace=workspace,
                home=home,
                tmp=tmp,
                readonly=[Path(sys.prefix), Path(sys.base_prefix), Path(drydock.__file__).parents[1]],
                proxy_sockets=self.proxy_sockets,
            )
        env = dict(self._settings.local_environment) | {
            "HOME": inside_home,
            "TMPDIR": inside_tmp,
            SANDBOX_ID_VARIABLE: directory.name,
        }
        argv = prefix + self._daemon_argv(workspace=inside_workspace, tmp=inside_tmp, listen_fd=listen_fd)
        return argv, env, inside_workspace

    async def create(self, thread_id: str, *, labels: Mapping[str, str] | None = None) -> SandboxHandle:
        """Start a sandbox's daemon; :class:`SandboxCreationFailed` when it cannot start or when no
        isolation is available and none was explicitly waived."""
        reserved = _RESERVED_LABELS & set(labels or {})
        if reserved:
            raise ValueError(f"labels {sorted(reserved)} are set by the local provider")
        if self._refusal is not None:
            raise SandboxCreationFailed(self._refusal)
        sandbox_id = f"sbx-{uuid.uuid4().hex}"
        directory = self.root / sandbox_id
        token = self._records.daemon_token(sandbox_id)
        if self.bwrap is not None:
            try:
                await asyncio.to_thread(prepare_socket_directory, self.proxy_sockets)
            except OSError as error:
                raise SandboxCreationFailed(f"the credential proxy's socket directory: {error}") from error
        try:
            await asyncio.to_thread(_make_directories, directory)
        except OSError as error:
            raise SandboxCreationFailed(f"cannot create {directory}: {error}") from error
        listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        try:
            port = listener.getsockname()[1]
            argv, env, workspace = self._command(directory, listener.fileno())
            try:
                process = await asyncio.to_thread(
                    spawn_daemon,
                    argv,
                    env=env,
                    cwd=directory,
                    log=directory / "daemon.log",
                    token=token,
                    listen_fd=listener.fileno(),
                )
            except OSError as error:
                await asyncio.to_thread(shutil.rmtree, directory, True)
                raise SandboxCreationFailed(f"cannot start the sandbox daemon: {error}") from error
        finally:
            listener.close()
        self._children[sandbox_id] = process
        handle = SandboxHandle(
            id=sandbox_id,
            provider=self.name,
            thread_id=thread_id,
            base_url=f"http://127.0.0.1:{port}",
            token=token,
            workspace=workspace,
            created_at=datetime.now(UTC),
            isolation=self.isolation,
            labels=dict(labels or {})
            | {PID_LABEL: str(process.pid), DIRECTORY_LABEL: str(directory), HOST_LABEL: self._host},
        )
        # Recorded before it is ready, so that a crash from here on leaves something the reaper finds.
        await self._records.put(handle)
        try:
            await self._wait_ready(handle, process)
        except SandboxCreationFailed:
            await self.delete(sandbox_id)
            raise
        if self.isolation == Isolation.NONE:
            log.warning(
                "sandbox is not isolated (DRYDOCK_SANDBOX_LOCAL_ALLOW_UNISOLATED): commands run as this user "
                "on the host and reach its network",
                sandbox_id=sandbox_id,
                thread_id=thread_id,
            )
        log.info("sandbox created", sandbox_id=sandbox_id, thread_id=thread_id, isolation=self.isolation)
        return handle

    async def _wait_ready(self, handle: SandboxHandle, process: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self._settings.ready_timeout.total_seconds()
        async with daemon_client(handle) as client:
            while True:
                if process.poll() is not None:
                    tail = await asyncio.to_thread(_tail, Path(handle.labels[DIRECTORY_LABEL]) / "daemon.log")
                    raise SandboxCreationFailed(f"sandbox daemon exited with {process.returncode}: {tail}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SandboxCreationFailed(
                        f"sandbox daemon not ready within {self._settings.ready_timeout.total_seconds():g} s"
                    )
                try:
                    if await health_status(client, within=min(remaining, 1.0)) == 200:
                        return
                except (httpx.HTTPError, TimeoutError):
                    pass
                await asyncio.sleep(0.01)

    async def connect(self, sandbox_id: str) -> SandboxHandle:
        handle = await self._records.require(
            sandbox_id, provider=self.name, label=HOST_LABEL, value=self._host, place="on host"
        )
        if not is_running(int(handle.labels[PID_LABEL]), handle.labels[DIRECTORY_LABEL]):
            raise SandboxNotFound(sandbox_id, "its daemon process is gone")
        return handle

    async def delete(self, sandbox_id: str) -> bool:
        handle = await self._records.get(sandbox_id)
        if handle is None:
            return await self._delete_unrecorded(sandbox_id)
        if handle.provider != self.name:
            return False
        directory = Path(handle.labels[DIRECTORY_LABEL])
        if handle.labels.get(HOST_LABEL) == self._host:
            await asyncio.to_thread(
                kill_sandbox, int(handle.labels[PID_LABEL]), str(directory), f"{SANDBOX_ID_VARIABLE}={sandbox_id}"
            )
            process = self._children.pop(sandbox_id, None)
            if process is not None:
                await asyncio.to_thread(process.wait)
            await asyncio.to_thread(shutil.rmtree, directory, True)
        else:
            log.warning("sandbox runs on another host; only its record is removed", sandbox_id=sandbox_id)
        await self._records.remove(sandbox_id)
        log.info("sandbox deleted", sandbox_id=sandbox_id, thread_id=handle.thread_id)
        return True

    async def list(self) -> builtins.list[SandboxHandle]:
        """The recorded sandboxes of this host and root, preceded by the root's sandboxes that
        have no record (see the module documentation), oldest first."""
        records = await self._records.all(provider=self.name)
        recorded = [
            handle
            for handle in records
            if handle.labels.get(HOST_LABEL) == self._host
            and Path(handle.labels.get(DIRECTORY_LABEL, "/")).parent == self.root
        ]
        found = await asyncio.to_thread(self._found_in_root)
        known = {handle.id for handle in records}
        unrecorded = [
            self._unrecorded(sandbox_id, since) for sandbox_id, since in found.items() if sandbox_id not in known
        ]
        unrecorded.sort(key=lambda handle: handle.created_at)
        return unrecorded + recorded

    def _found_in_root(self) -> dict[str, float]:
        """Sandbox ids in the root, each with when its directory last changed (0: it is gone,
        only processes remain)."""
        found: dict[str, float] = {}
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for entry in self.root.iterdir():
                if _SANDBOX_ID.match(entry.name):
                    with contextlib.suppress(FileNotFoundError):
                        found[entry.name] = entry.lstat().st_mtime
        for sandbox_id in sandbox_ids_running_in(self.root, SANDBOX_ID_VARIABLE):
            if _SANDBOX_ID.match(sandbox_id):
                found.setdefault(sandbox_id, 0.0)
        return found

    def _unrecorded(self, sandbox_id: str, since: float) -> SandboxHandle:
        """A handle for a sandbox without a record: enough for the reaper, not for use."""
        return SandboxHandle(
            id=sandbox_id,
            provider=self.name,
            thread_id="",
            base_url="",
            token="",
            workspace="",
            created_at=datetime.fromtimestamp(since, UTC),
            isolation=self.isolation,
            labels={PID_LABEL: "-1", DIRECTORY_LABEL: str(self.root / sandbox_id), HOST_LABEL: self._host},
        )

    async def _delete_unrecorded(self, sandbox_id: str) -> bool:
        if not _SANDBOX_ID.match(sandbox_id) or sandbox_id not in await asyncio.to_thread(self._found_in_root):
            return False
        directory = self.root / sandbox_id
        # No pid without the record: every process carrying the sandbox's id is killed.
        await asyncio.to_thread(kill_sandbox, -1, str(directory), f"{SANDBOX_ID_VARIABLE}={sandbox_id}")
        process = self._children.pop(sandbox_id, None)
        if process is not None:
            await asyncio.to_thread(process.wait)
        await asyncio.to_thread(shutil.rmtree, directory, True)
        log.info("sandbox without a record deleted", sandbox_id=sandbox_id)
        return True

    async def aclose(self) -> None:
        self._children.clear()


def _make_directories(directory: Path) -> None:
    directory.parent.mkdir(parents=True, exist_ok=True)
    directory.mkdir(mode=0o700)
    for name in ("workspace", "home", "tmp"):
        (directory / name).mkdir(mode=0o700)


def _tail(path: Path, limit: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:].strip() or "(no output)"
    except OSError:
        return "(no log)"
