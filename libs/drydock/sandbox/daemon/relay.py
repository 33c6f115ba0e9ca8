"""The relay inside a sandbox's network namespace: it listens on the loopback address and port
that the proxy URLs name and carries each connection, byte for byte, to a Unix socket of the
credential proxy bound into the sandbox. So the sandbox's git and ``HTTPS_PROXY`` settings stay
the same URLs while nothing but the proxy is reachable."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("drydock.sandbox.daemon.relay")

CHUNK = 64 * 1024


@dataclass(frozen=True)
class Relay:
    """Listen on ``host``:``port``; relay to the Unix socket at ``socket_path``."""

    host: str
    port: int
    socket_path: Path

    @classmethod
    def parse(cls, raw: str) -> Relay:
        """``HOST:PORT=PATH``, the host of IPv6 in brackets (``[::1]:8081=/run/proxy/reverse.sock``)."""
        address, separator, path = raw.partition("=")
        host, colon, port = address.rpartition(":")
        if not separator or not colon or not host or not path or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{raw!r} is not HOST:PORT=PATH")
        return cls(host.removeprefix("[").removesuffix("]"), int(port), Path(path))

    def argument(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}={self.socket_path}"


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(CHUNK):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.transport.abort()


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError, OSError):
        await writer.wait_closed()


async def start_relay(relay: Relay) -> asyncio.Server:
    """Start listening; each connection is relayed until both directions have ended."""

    async def connected(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            proxy_reader, proxy_writer = await asyncio.open_unix_connection(str(relay.socket_path))
        except OSError as error:
            log.warning("credential proxy unreachable at %s: %s", relay.socket_path, error)
            await _close(client_writer)
            return
        try:
            await asyncio.gather(_pump(client_reader, proxy_writer), _pump(proxy_reader, client_writer))
        finally:
            await _close(proxy_writer)
            await _close(client_writer)

    return await asyncio.start_server(connected, host=relay.host, port=relay.port, limit=CHUNK)
