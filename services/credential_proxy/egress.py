"""The egress proxy: an HTTP forward proxy (``CONNECT host:port`` tunnels and absolute-form
``GET http://…`` requests) that lets a sandbox reach only the hosts on the allowlist, and a host
that only a wildcard entry allows only at public addresses (:mod:`drydock.credentials.allowlist`).
Such a name is resolved once, every address vetted, and the connection made to a vetted address,
so an answer that changes between the check and the connection cannot lead elsewhere.

The sandbox presents its grant as the proxy password (``HTTPS_PROXY=http://drydock:<grant>@…``,
sent as ``Proxy-Authorization``), so every connection, allowed or denied, is attributed to a
thread. TLS stays end to end: a tunnel is spliced byte for byte, never opened. A tunnel reaches
port 443, or a port an entry names: one to port 80 would carry plain requests naming any host.
An absolute-form request is sent alone on its upstream connection with the destination as its
``Host``; what the client sends after it is not read.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
from dataclasses import dataclass
from urllib.parse import urlsplit

import structlog
from redis.exceptions import RedisError

from drydock.credentials import Grant, GrantRejected
from drydock.credentials.allowlist import Reach
from drydock.errors import describe
from drydock.infra import addresses
from drydock.infra.addresses import IPAddress, Resolver, non_public
from drydock.infra.redis import StoreUnavailable
from services.credential_proxy.context import ProxyContext
from services.credential_proxy.metrics import REQUESTS
from services.credential_proxy.store_outage import RETRY_AFTER_SECONDS

log = structlog.get_logger(__name__)

HEAD_LIMIT = 1 << 16
HEAD_TIMEOUT = 30.0
CHUNK = 1 << 16
RETRY_LATER = {"Retry-After": str(RETRY_AFTER_SECONDS)}
_REPLACED = frozenset(
    {
        "proxy-authorization",
        "proxy-connection",
        "connection",
        "keep-alive",
        "host",
        "content-length",
        "transfer-encoding",
    }
)


class _Refusal(Exception):
    def __init__(self, status: int, reason: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.headers = headers or {}


@dataclass(frozen=True)
class _Head:
    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]

    def header(self, name: str) -> str | None:
        return next((value for key, value in self.headers if key.lower() == name), None)


def _parse_head(raw: bytes) -> _Head:
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _Refusal(400, "Bad Request", "malformed request line")
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise _Refusal(400, "Bad Request", "malformed header")
        headers.append((name.strip(), value.strip()))
    return _Head(parts[0].upper(), parts[1], parts[2], headers)


def _grant_token(head: _Head) -> str | None:
    scheme, _, value = (head.header("proxy-authorization") or "").partition(" ")
    if scheme.lower() == "bearer":
        return value.strip() or None
    if scheme.lower() == "basic":
        try:
            _, _, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return password or None
    return None


def _destination(head: _Head) -> tuple[str, int]:
    try:
        if head.method == "CONNECT":
            parsed = urlsplit(f"//{head.target}")
            default = 443
        else:
            parsed = urlsplit(head.target)
            if parsed.scheme != "http":
                raise _Refusal(400, "Bad Request", "only CONNECT and absolute http:// requests are proxied")
            default = 80
        port = parsed.port or default
    except ValueError:
        raise _Refusal(400, "Bad Request", f"invalid host or port in {head.target!r}") from None
    if not parsed.hostname:
        raise _Refusal(400, "Bad Request", f"no host in {head.target!r}")
    return parsed.hostname, port


class EgressProxy:
    """One instance per process; :meth:`handle` serves one client connection."""

    def __init__(self, ctx: ProxyContext, resolver: Resolver = addresses.resolve) -> None:
        self._ctx = ctx
        self._resolve = resolver

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._serve(reader, writer)
        except _Refusal as refusal:
            await _answer(writer, refusal)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = _parse_head(await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT))
        grant = await self._authenticate(head)
        host, port = _destination(head)
        length = _content_length(head)
        reach = self._ctx.allowlist.reach(host, port, tunnel=head.method == "CONNECT")
        if reach is None and head.method == "CONNECT" and self._ctx.allowlist.allows(host, port):
            reason = f"a CONNECT tunnel reaches port 443 or a port an egress allowlist entry names, not {host}:{port}"
            raise self._denied(grant, host, port, reason)
        if reach is None:
            raise self._denied(grant, host, port, f"{host}:{port} is not on the egress allowlist")
        try:
            async with asyncio.timeout(self._ctx.runtime.settings.proxy.upstream_timeout):
                if reach is Reach.ANY_ADDRESS:
                    upstream_reader, upstream_writer = await asyncio.open_connection(host, port, limit=CHUNK)
                else:
                    vetted = await self._public_addresses(grant, host, port)
                    upstream_reader, upstream_writer = await _open_first(vetted, port)
        except (OSError, TimeoutError) as error:
            REQUESTS.labels("egress", "upstream_error").inc()
            raise _Refusal(502, "Bad Gateway", f"cannot connect to {host}:{port}: {error}") from None
        REQUESTS.labels("egress", "forwarded").inc()
        log.debug("egress", thread_id=grant.thread_id, host=host, port=port, method=head.method)
        try:
            if head.method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
            else:
                # One request, its Host the destination's: whatever the client sends after it is not read.
                upstream_writer.write(_origin_form(head, _authority(host, port), length))
                await _copy(reader, upstream_writer, length)
                await _pipe(upstream_reader, writer)
        finally:
            upstream_writer.close()
            with contextlib.suppress(ConnectionError):
                await upstream_writer.wait_closed()

    async def _public_addresses(self, grant: Grant, host: str, port: int) -> list[IPAddress]:
        """The addresses of ``host``, all of them public, or a refusal naming those that are not."""
        literal = addresses.literal(host)
        found = [literal] if literal is not None else await self._resolve(host, port)
        private = sorted({str(address) for address in found if non_public(address)})
        if private:
            raise self._denied(
                grant,
                host,
                port,
                f"{host} resolves to a non-public address ({', '.join(private)}); a wildcard entry of the "
                "egress allowlist reaches public addresses only (an entry naming the host reaches it anywhere)",
            )
        return found

    def _denied(self, grant: Grant, host: str, port: int, reason: str) -> _Refusal:
        REQUESTS.labels("egress", "denied").inc()
        log.warning(
            "egress denied",
            thread_id=grant.thread_id,
            sandbox_id=grant.sandbox_id,
            role=grant.role.value,
            host=host,
            port=port,
            reason=reason,
        )
        return _Refusal(403, "Forbidden", reason)

    async def _authenticate(self, head: _Head) -> Grant:
        challenge = {"Proxy-Authenticate": 'Basic realm="drydock egress"'}
        token = _grant_token(head)
        if token is None:
            REQUESTS.labels("egress", "rejected").inc()
            raise _Refusal(407, "Proxy Authentication Required", "a credential-proxy grant is required", challenge)
        try:
            return await self._ctx.grants.resolve(token)
        except GrantRejected as rejected:
            REQUESTS.labels("egress", "rejected").inc()
            known = await self._ctx.grants.get(token)
            log.warning("egress grant rejected", thread_id=known.thread_id if known else None, reason=str(rejected))
            raise _Refusal(407, "Proxy Authentication Required", str(rejected), challenge) from None
        except (RedisError, StoreUnavailable) as error:
            REQUESTS.labels("egress", "store_unavailable").inc()
            log.warning("store unavailable; egress answered 503", error=describe(error))
            raise _Refusal(
                503, "Service Unavailable", "the store is unavailable for a moment; retry shortly", RETRY_LATER
            ) from None


async def _open_first(candidates: list[IPAddress], port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the first of ``candidates`` that accepts one, in the resolver's order."""
    failure = OSError("the name has no address")
    for address in candidates:
        try:
            return await asyncio.open_connection(str(address), port, limit=CHUNK)
        except OSError as error:
            failure = error
    raise failure


def _content_length(head: _Head) -> int:
    """The length of an absolute-form request's body; a chunked one is refused."""
    if head.method == "CONNECT":
        return 0
    if head.header("transfer-encoding") is not None:
        raise _Refusal(411, "Length Required", "a request body needs a Content-Length (chunked bodies are not proxied)")
    lengths = {value for name, value in head.headers if name.lower() == "content-length"}
    if not lengths:
        return 0
    if len(lengths) > 1 or not next(iter(lengths)).isdigit():
        raise _Refusal(400, "Bad Request", "malformed Content-Length")
    return int(next(iter(lengths)))


def _authority(host: str, port: int) -> str:
    name = f"[{host}]" if ":" in host else host
    return name if port == 80 else f"{name}:{port}"


def _origin_form(head: _Head, authority: str, length: int) -> bytes:
    parsed = urlsplit(head.target)
    path = (parsed.path or "/") + (f"?{parsed.query}" if parsed.query else "")
    lines = [f"{head.method} {path} {head.version}", f"Host: {authority}"]
    lines += [f"{name}: {value}" for name, value in head.headers if name.lower() not in _REPLACED]
    if length:
        lines.append(f"Content-Length: {length}")
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, length: int) -> None:
    while length > 0:
        data = await reader.read(min(CHUNK, length))
        if not data:
            raise asyncio.IncompleteReadError(b"", length)
        writer.write(data)
        await writer.drain()
        length -= len(data)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


async def _answer(writer: asyncio.StreamWriter, refusal: _Refusal) -> None:
    body = f"drydock egress proxy: {refusal.message}\n".encode()
    headers = {"Content-Type": "text/plain; charset=utf-8", "Content-Length": str(len(body)), "Connection": "close"}
    headers.update(refusal.headers)
    head = f"HTTP/1.1 {refusal.status} {refusal.reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    with contextlib.suppress(ConnectionError):
        writer.write(head.encode("latin-1") + b"\r\n" + body)
        await writer.drain()
