"""Both listeners of the credential proxy on one runtime: the reverse proxy (git, API, health)
and the egress forward proxy, each on a TCP port and on a Unix socket in ``proxy.socket_dir``
(which local sandboxes reach through their relay; see :mod:`drydock.sandbox.proxy_sockets`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import structlog
from aiohttp import web
from redis.exceptions import RedisError

from drydock.credentials.cipher import SecretCipher
from drydock.credentials.user_tokens import UserTokens
from drydock.errors import describe
from drydock.infra import addresses
from drydock.infra.addresses import Resolver
from drydock.runtime import Runtime
from drydock.sandbox.proxy_sockets import (
    EGRESS_SOCKET,
    REVERSE_SOCKET,
    prepare_socket_directory,
    socket_directory,
)
from services.credential_proxy.app import create_app
from services.credential_proxy.context import ProxyContext, proxy_context
from services.credential_proxy.egress import HEAD_LIMIT, EgressProxy

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Listening:
    """Where the proxy listens once started (ports resolved when configured as 0)."""

    url: str
    egress_url: str
    socket_dir: Path
    """Where ``reverse.sock`` and ``egress.sock`` are."""
    context: ProxyContext
    reencryption: asyncio.Task[None]
    """The start-up pass that moves stored tokens to the newest key; done soon after start."""


async def _reencrypt(ctx: ProxyContext) -> None:
    """After a key rotation (a new key first in DRYDOCK_CRYPTO_KEYS), move stored tokens to it,
    the vault's and users' OAuth tokens, so that the old key can be retired once every replica
    has started with the new list."""
    runtime = ctx.runtime
    users = UserTokens(runtime.redis, runtime.keys, SecretCipher(runtime.settings.crypto.keys))
    try:
        rewritten = await ctx.credentials.vault.rotate() + await users.rotate()
    except RedisError as error:
        log.error("re-encrypting stored tokens failed", error=describe(error))
        return
    if rewritten:
        log.info("stored tokens re-encrypted under the newest key", count=rewritten)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that name it (else ~40 ms
    # delayed-ACK stalls on reused connections).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(512)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


@contextlib.contextmanager
def _bind_unix(path: Path) -> Iterator[socket.socket]:
    """A listening socket at ``path``, put in place by a rename: a sandbox never sees the path
    missing, and the socket of a proxy that stopped is replaced. Removed on exit if still ours."""
    staging = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(staging))
        sock.listen(512)
        sock.setblocking(False)
        os.replace(staging, path)
    except OSError:
        sock.close()
        with contextlib.suppress(OSError):
            staging.unlink()
        raise
    ours = path.stat().st_ino
    try:
        yield sock
    finally:
        sock.close()
        with contextlib.suppress(OSError):
            if path.stat().st_ino == ours:
                path.unlink()


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@contextlib.asynccontextmanager
async def serving(runtime: Runtime, *, resolver: Resolver = addresses.resolve) -> AsyncIterator[Listening]:
    """Serve both listeners on ``settings.proxy.host``/``port``/``egress_port`` until exit;
    ``resolver`` answers the egress proxy's names that only a wildcard entry allows."""
    settings = runtime.settings.proxy
    async with proxy_context(runtime) as ctx, contextlib.AsyncExitStack() as stack:
        reverse_socket = stack.enter_context(_bind(settings.host, settings.port))
        egress_socket = stack.enter_context(_bind(settings.host, settings.egress_port))
        directory = await asyncio.to_thread(prepare_socket_directory, socket_directory(settings))
        reverse_unix = stack.enter_context(_bind_unix(directory / REVERSE_SOCKET))
        egress_unix = stack.enter_context(_bind_unix(directory / EGRESS_SOCKET))
        # Bodies are forwarded exactly as sent: gzip-encoded git requests stay gzip-encoded.
        # aiohttp closes a connection whose next request head has not arrived within its keep-alive
        # timeout (from the opening or the last answer): the read deadline of heads.
        runner = web.AppRunner(
            create_app(ctx),
            auto_decompress=False,
            access_log=None,
            handle_signals=False,
            keepalive_timeout=settings.read_timeout.total_seconds(),
        )
        await runner.setup()
        stack.push_async_callback(runner.cleanup)
        await web.SockSite(runner, reverse_socket).start()
        await web.SockSite(runner, reverse_unix).start()
        handler = EgressProxy(ctx, resolver).handle
        for sock in (egress_socket, egress_unix):
            egress = await asyncio.start_server(handler, sock=sock, limit=HEAD_LIMIT)
            stack.push_async_callback(egress.wait_closed)
            stack.callback(egress.close)
        rotation = asyncio.create_task(_reencrypt(ctx), name="credential-proxy-reencrypt")
        try:
            yield Listening(_url(reverse_socket), _url(egress_socket), directory, ctx, rotation)
        finally:
            rotation.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await rotation
