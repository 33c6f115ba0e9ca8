"""Reading a webhook body with a size limit: a declared or streamed size above it is refused
with 413 before more of the body is read."""

from __future__ import annotations

from starlette.types import Receive

from services.ingress.errors import Rejected


def _too_large(limit: int) -> Rejected:
    return Rejected(413, f"body larger than {limit} bytes", "too_large", limit_bytes=limit)


def _disconnected() -> Rejected:
    return Rejected(400, "client disconnected before the body was complete", "malformed")


async def read_body(receive: Receive, declared: str | None, limit: int) -> bytes:
    """The request's body from the ASGI ``receive``; ``declared`` is its Content-Length header."""
    if declared is not None:
        if not declared.isdigit():
            raise Rejected(400, "Content-Length is not a number", "malformed")
        if len(declared) > 18 or int(declared) > limit:
            raise _too_large(limit)
    message = await receive()
    if message["type"] != "http.request":
        raise _disconnected()
    body: bytes = message.get("body", b"")
    if len(body) > limit:
        raise _too_large(limit)
    if not message.get("more_body", False):
        return body
    chunks = [body]
    size = len(body)
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise _disconnected()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
