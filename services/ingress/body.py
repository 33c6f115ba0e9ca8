"""Reading a webhook body with a size limit: a declared or streamed size above it is refused
with 413 before more of the body is read."""

from __future__ import annotations

from starlette.requests import ClientDisconnect, Request

from services.ingress.errors import Rejected


def _too_large(limit: int) -> Rejected:
    return Rejected(413, f"body larger than {limit} bytes", "too_large", limit_bytes=limit)


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise Rejected(400, "Content-Length is not a number", "malformed")
        if len(declared) > 18 or int(declared) > limit:
            raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
    except ClientDisconnect:
        raise Rejected(400, "client disconnected before the body was complete", "malformed") from None
    return b"".join(chunks)
