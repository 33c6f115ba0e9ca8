"""A small HTTP/1.1 server: h11 speaks the protocol, asyncio streams carry the bytes.

The daemon depends on the standard library and h11 only. h11 is pure Python and cheap to
import; aiohttp is not an option, because its import alone costs more than half a second of
every sandbox's cold start. The daemon has one client, the worker's backend, and answers in
JSON. Limits are explicit: the request line and headers fit in 64 KiB (431 otherwise), a body
(``Content-Length`` or chunked) in ``max_body`` bytes (413 otherwise, answered without reading
the rest), and a connection that takes longer than ``idle_timeout`` to deliver a request is
closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import h11

HEAD_LIMIT = 64 * 1024
MAX_HEADERS = 100
READ_SIZE = 64 * 1024


class HttpError(Exception):
    """Answered as ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str, *, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


class BadRequest(HttpError):
    def __init__(self, message: str) -> None:
        super().__init__(400, message)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: Mapping[str, str]
    """Header names in lower case."""
    body: bytes

    def json(self) -> dict[str, Any]:
        """The body as a JSON object; :class:`BadRequest` otherwise."""
        try:
            value = json.loads(self.body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise BadRequest("the request body is not valid JSON") from None
        if not isinstance(value, dict):
            raise BadRequest("the request body must be a JSON object")
        return value


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


def json_response(value: object, *, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(status, json.dumps(value).encode(), dict(headers or {}))


def error_response(error: HttpError) -> Response:
    return json_response({"error": error.message}, status=error.status, headers=error.headers)


Handler = Callable[[Request], Awaitable[Response]]


def _refusal(error: h11.RemoteProtocolError) -> HttpError:
    if error.error_status_hint == 431:
        return HttpError(431, "the request line and headers exceed 64 KiB")
    if error.error_status_hint == 400:
        return BadRequest(f"malformed request: {error}")
    return HttpError(error.error_status_hint, str(error))


class _Connection:
    """h11's state of one connection and the streams it runs on."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_body: int) -> None:
        self.protocol = h11.Connection(h11.SERVER, max_incomplete_event_size=HEAD_LIMIT)
        self.reader = reader
        self.writer = writer
        self.max_body = max_body
        self.method = b""

    async def next_event(self) -> h11.Event:
        while True:
            try:
                event = self.protocol.next_event()
            except h11.RemoteProtocolError as error:
                raise _refusal(error) from None
            if isinstance(event, h11.Event):
                return event
            if event is h11.PAUSED:
                raise RuntimeError("a request was read before the previous one was answered")
            if self.protocol.they_are_waiting_for_100_continue:
                self.writer.write(
                    self.protocol.send(h11.InformationalResponse(status_code=100, headers=[], reason="Continue"))
                )
            self.protocol.receive_data(await self.reader.read(READ_SIZE))

    async def read_request(self) -> Request | None:
        """The next request with its body; ``None`` when the client closed between requests."""
        self.method = b""
        event = await self.next_event()
        if not isinstance(event, h11.Request):
            return None
        self.method = event.method
        if not event.http_version.startswith(b"1."):
            raise HttpError(505, f"HTTP/{event.http_version.decode()} is not supported")
        if len(event.headers) > MAX_HEADERS:
            raise HttpError(431, "too many headers")
        # h11 bounds only a head still incomplete, so one that the last read completed may be larger.
        head_size = len(event.method) + len(event.target) + 14 + sum(len(n) + len(v) + 4 for n, v in event.headers)
        if head_size > HEAD_LIMIT:
            raise HttpError(431, "the request line and headers exceed 64 KiB")
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in event.headers}
        if int(headers.get("content-length", "0")) > self.max_body:
            raise HttpError(413, f"the request body exceeds {self.max_body} bytes")
        chunks: list[bytes] = []
        size = 0
        while not isinstance(part := await self.next_event(), h11.EndOfMessage):
            if isinstance(part, h11.Data):
                size += len(part.data)
                if size > self.max_body:
                    raise HttpError(413, f"the request body exceeds {self.max_body} bytes")
                chunks.append(part.data)
        path = event.target.decode("latin-1").split("?", 1)[0]
        return Request(event.method.decode("latin-1"), path, headers, b"".join(chunks))

    def encode(self, response: Response, *, close: bool) -> bytes:
        headers = [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(response.body))),
            *response.headers.items(),
        ]
        if close:
            headers.append(("Connection", "close"))
        reason = HTTPStatus(response.status).phrase
        data = self.protocol.send(h11.Response(status_code=response.status, headers=headers, reason=reason))
        if self.method != b"HEAD":
            data += self.protocol.send(h11.Data(data=response.body))
        return data + self.protocol.send(h11.EndOfMessage())

    def next_cycle(self) -> bool:
        """Get ready for the next request; ``False`` when the connection must close instead."""
        if self.protocol.our_state is not h11.DONE or self.protocol.their_state is not h11.DONE:
            return False
        self.protocol.start_next_cycle()
        return True


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seconds: float = 2.0) -> None:
    """Half-close, then discard what the client is still sending (a refused body), so it reads
    our answer instead of a connection reset."""
    if writer.can_write_eof():
        writer.write_eof()
    with contextlib.suppress(TimeoutError, ConnectionError):
        async with asyncio.timeout(seconds):
            while await reader.read(READ_SIZE):
                pass


async def serve_connection(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    handler: Handler,
    *,
    max_body: int,
    idle_timeout: float = 300.0,
) -> None:
    """Answer requests on one connection until the client closes it or an error ends it."""
    connection = _Connection(reader, writer, max_body)
    try:
        while True:
            received = False
            try:
                async with asyncio.timeout(idle_timeout):
                    request = await connection.read_request()
                if request is None:
                    return
                received = True
                response = await handler(request)
            except HttpError as error:
                response = error_response(error)
            # A request not read to its end leaves the connection unusable: answer, then close.
            writer.write(connection.encode(response, close=not received))
            await writer.drain()
            if not connection.next_cycle():
                await _linger(reader, writer)
                return
    except (TimeoutError, ConnectionError):
        return
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
