"""The network tools' guard against server-side request forgery, and the guarded request both
use: only http(s), no loopback, private, link-local, reserved or multicast destination (unless
``DRYDOCK_TOOLS_ALLOW_PRIVATE_ADDRESSES``), every redirect hop checked again, the body read up
to ``fetch_max_bytes``, the whole exchange bounded by ``timeout``.

A name is resolved once per hop: every address it answers is vetted, and the request is sent
to the first of them (the URL's host replaced by the address, the ``Host`` header and the TLS
server name kept as the name), so a name whose answer changes between the check and the
connection (DNS rebinding) still reaches only the vetted address.
"""

from __future__ import annotations

import asyncio
import codecs
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import httpx

from drydock.config import ToolSettings
from drydock.infra import addresses
from drydock.infra.addresses import IPAddress, Resolver, non_public

MAX_REDIRECTS = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_SCHEMES = frozenset({"http", "https"})
_ORIGIN_BOUND = frozenset({"authorization", "cookie", "proxy-authorization"})
_FRAMING = frozenset({"host", "content-length", "transfer-encoding", "connection"})
"""Headers the client sets itself; a caller's Host would address another site than the one checked."""
_BODY_HEADERS = frozenset({"content-type", "content-length", "content-encoding", "transfer-encoding"})
_DEFAULT_HEADERS = {"user-agent": "Drydock (coding agent)", "accept-encoding": "gzip, deflate"}


class FetchError(Exception):
    """A request that failed or was not made; the message is written for the model."""


class Refused(FetchError):
    """A destination the tools will not contact."""


@dataclass(frozen=True)
class Fetched:
    url: httpx.URL
    """Where the final response came from, after redirects."""
    status_code: int
    reason: str
    headers: httpx.Headers
    body: bytes
    truncated: bool
    """The body stopped at ``fetch_max_bytes``."""


def _require_web(url: httpx.URL) -> None:
    if url.scheme not in _SCHEMES:
        raise Refused(f"refused {url}: only http and https URLs can be fetched")
    if not url.host:
        raise Refused(f"refused {url}: the URL has no host")


async def resolve(host: str, port: int) -> list[IPAddress]:
    """The system resolver's addresses for ``host``, in its order of preference;
    :class:`FetchError` when it has none (the :data:`Resolver` the guard uses unless given one)."""
    try:
        return await addresses.resolve(host, port)
    except socket.gaierror as error:
        raise FetchError(f"could not resolve {host}: {error.strerror}") from None


async def _vetted_address(url: httpx.URL, resolver: Resolver) -> IPAddress:
    literal = addresses.literal(url.host)
    found = [literal] if literal is not None else await resolver(url.host, url.port or _port(url))
    if not found:
        raise FetchError(f"could not resolve {url.host}: no address")
    blocked = sorted({str(address) for address in found if non_public(address)})
    if blocked:
        raise Refused(
            f"refused {url}: {url.host} resolves to a non-public address ({', '.join(blocked)}); "
            "loopback, private, link-local and reserved networks are off limits "
            "(an administrator can allow them for development with DRYDOCK_TOOLS_ALLOW_PRIVATE_ADDRESSES)"
        )
    return found[0]


def _port(url: httpx.URL) -> int:
    return 443 if url.scheme == "https" else 80


async def check_destination(url: httpx.URL, *, allow_private: bool, resolver: Resolver = resolve) -> None:
    """Raise :class:`Refused` unless ``url`` is http(s) to a host with only public addresses
    (any host when ``allow_private``)."""
    _require_web(url)
    if not allow_private:
        await _vetted_address(url, resolver)


def _pinned(request: httpx.Request, address: IPAddress) -> httpx.Request:
    """``request`` sent to ``address`` while the server still sees the name, in ``Host`` and in TLS."""
    name = request.url
    if name.host == str(address):
        return request
    request.url = name.copy_with(host=str(address))
    request.headers["host"] = name.netloc.decode("ascii")
    if name.scheme == "https":
        request.extensions["sni_hostname"] = name.host
    return request


def _redirected(method: str, status: int) -> str:
    if status == 303 and method != "HEAD":
        return "GET"
    if status in (301, 302) and method == "POST":
        return "GET"
    return method


async def _read(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


async def guarded_fetch(
    http: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    tools: ToolSettings,
    headers: Mapping[str, str] | None = None,
    content: bytes | None = None,
    permit: Callable[[httpx.URL], None] | None = None,
    accepts: Callable[[httpx.URL, httpx.Headers], None] | None = None,
    resolver: Resolver = resolve,
) -> Fetched:
    """Send one request through ``http``, following up to :data:`MAX_REDIRECTS` redirects with
    every hop checked by ``permit`` (which raises :class:`Refused`) and :func:`check_destination`,
    and sent to the address that check vetted (``resolver`` answers it, once per hop).
    ``accepts`` sees the final response's headers before its body is read and may raise
    :class:`FetchError` to decline it.

    Requests are built without the client's defaults and cookies, so nothing of ours reaches the
    destination; origin-bound headers are dropped when a redirect leaves the origin.
    """
    try:
        target = httpx.URL(url)
    except httpx.InvalidURL as error:
        raise Refused(f"refused {url!r}: not a valid URL ({error})") from None
    sent = httpx.Headers(_DEFAULT_HEADERS)
    sent.update({name: value for name, value in (headers or {}).items() if name.lower() not in _FRAMING})
    try:
        async with asyncio.timeout(tools.timeout):
            for _ in range(MAX_REDIRECTS + 1):
                _require_web(target)
                # The caller's rule first: a host it refuses is not even resolved.
                if permit is not None:
                    permit(target)
                request = httpx.Request(method, target, headers=sent, content=content)
                if not tools.allow_private_addresses:
                    request = _pinned(request, await _vetted_address(target, resolver))
                response = await http.send(request, stream=True, follow_redirects=False)
                try:
                    location = response.headers.get("location")
                    if response.status_code in _REDIRECTS and location:
                        following = target.join(location)
                        if following.scheme != target.scheme or following.netloc != target.netloc:
                            for name in _ORIGIN_BOUND:
                                sent.pop(name, None)
                        changed = _redirected(method, response.status_code)
                        if changed != method:
                            method, content = changed, None
                            for name in _BODY_HEADERS:
                                sent.pop(name, None)
                        target = following
                        continue
                    if accepts is not None:
                        accepts(target, response.headers)
                    body, truncated = (b"", False) if method == "HEAD" else await _read(response, tools.fetch_max_bytes)
                    return Fetched(
                        target, response.status_code, response.reason_phrase, response.headers, body, truncated
                    )
                finally:
                    await response.aclose()
            raise FetchError(f"gave up on {url}: more than {MAX_REDIRECTS} redirects")
    except TimeoutError:
        raise FetchError(f"{method} {url} took longer than {tools.timeout:g} s and was abandoned") from None
    except (httpx.HTTPError, httpx.InvalidURL) as error:
        raise FetchError(f"{method} {url} failed: {type(error).__name__}: {error}") from None


def media_type(headers: httpx.Headers) -> str:
    """A response's media type without parameters, lower case; empty when not given."""
    return str(headers.get("content-type", "")).split(";")[0].strip().lower()


def _charset(fetched: Fetched) -> str:
    for parameter in fetched.headers.get("content-type", "").split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            try:
                return codecs.lookup(value.strip().strip('"')).name
            except LookupError:
                break
    return "utf-8"


def is_textual(kind: str) -> bool:
    """Whether a media type is text a model can read."""
    return (
        kind.startswith("text/")
        or kind.endswith(("+json", "+xml"))
        or kind
        in {
            "application/json",
            "application/xml",
            "application/javascript",
            "application/x-www-form-urlencoded",
            "application/yaml",
            "application/x-yaml",
            "application/x-ndjson",
        }
    )


def text_of(fetched: Fetched) -> str | None:
    """The body as text, or None when it is binary (by its type, or undeclared and not UTF-8)."""
    kind = media_type(fetched.headers)
    if kind and not is_textual(kind):
        return None
    if not kind:
        # A cut body may end inside a multi-byte character; only the cut may fail to decode.
        whole = fetched.body[: -3 if fetched.truncated else None]
        try:
            whole.decode()
        except UnicodeDecodeError:
            return None
    return fetched.body.decode(_charset(fetched), errors="replace")
