"""Run the daemon until SIGTERM or SIGINT, then kill every command it started."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Sequence

from drydock.sandbox.daemon.app import Daemon, DaemonConfig
from drydock.sandbox.daemon.http11 import serve_connection
from drydock.sandbox.daemon.relay import Relay, start_relay

log = logging.getLogger("drydock.sandbox.daemon")


async def serve(
    config: DaemonConfig,
    *,
    sock: socket.socket | None = None,
    host: str = "",
    port: int = 0,
    relays: Sequence[Relay] = (),
) -> None:
    """Serve on ``sock`` (already bound and listening) or on ``host``:``port``, and run ``relays``."""
    daemon = Daemon(config)
    connections: set[asyncio.Task[None]] = set()

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        connections.add(task)
        try:
            await serve_connection(reader, writer, daemon, max_body=config.max_request_bytes)
        finally:
            connections.discard(task)

    if sock is not None:
        server = await asyncio.start_server(connected, sock=sock, limit=64 * 1024)
    else:
        server = await asyncio.start_server(connected, host=host or None, port=port, limit=64 * 1024)
    relay_servers = [await start_relay(relay) for relay in relays]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    log.info("serving %s", ", ".join(str(s.getsockname()) for s in server.sockets))
    for relay in relays:
        log.info("relaying %s:%s to %s", relay.host, relay.port, relay.socket_path)
    async with server:
        await stop.wait()
        log.info("stopping: killing running commands")
        daemon.kill_commands()
        server.close()
        for relay_server in relay_servers:
            relay_server.close()
        for task in list(connections):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*connections, return_exceptions=True)
