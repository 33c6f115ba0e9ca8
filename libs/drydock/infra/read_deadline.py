"""A deadline on receiving each HTTP request, headers and body: uvicorn bounds only the idle time
between requests, so a client that sends part of a request (headers without their end, a body
shorter than declared, a chunk larger than it ever sends) would hold its connection forever.

The clock starts when the connection opens or a request's first bytes arrive and stops when the
request is complete. When it runs out the connection is closed; a request whose headers never
arrived is answered ``408`` first (after them the app owns the answer: reading the body, it sees
the disconnect).
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = structlog.get_logger(__name__)

_TIMEOUT_BODY = b'{"error": "request not received in time"}'
_REQUEST_TIMEOUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: %d\r\n\r\n%s" % (len(_TIMEOUT_BODY), _TIMEOUT_BODY)
)


class ReadDeadlineProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a read deadline of :attr:`read_timeout` seconds."""

    read_timeout: float = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_deadline: asyncio.TimerHandle | None = None
        self._headers_received = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        # Armed before parsing: a packet that completes the request disarms it in the parser.
        if self._read_deadline is None:
            self._arm()
        super().data_received(data)

    def on_message_begin(self) -> None:
        self._headers_received = False
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._headers_received = True
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._read_deadline = self.loop.call_later(self.read_timeout, self._expired)

    def _disarm(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _expired(self) -> None:
        self._read_deadline = None
        if self.transport.is_closing():
            return
        log.info(
            "request not received in time; connection closed",
            client=self.client[0] if self.client else None,
            limit_seconds=self.read_timeout,
            part="body" if self._headers_received else "headers",
        )
        # Once the headers are in, the app owns the answer (it may have sent one already).
        if not self._headers_received:
            self.transport.write(_REQUEST_TIMEOUT)
        self.transport.close()


def with_read_deadline(seconds: float) -> type[ReadDeadlineProtocol]:
    """The protocol class for uvicorn's ``http`` setting, with a deadline of ``seconds``."""
    return type("ReadDeadlineProtocol", (ReadDeadlineProtocol,), {"read_timeout": seconds})
