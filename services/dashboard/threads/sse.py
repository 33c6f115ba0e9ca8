"""Server-sent events: where a viewer's stream starts, the stream itself, and an event encoded
once for all of its viewers in this process."""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable

from fastapi.responses import StreamingResponse

from services.dashboard.threads.events import StoredEvent

CACHE_SIZE = 4096
LAST_SEQUENCE = 2**63 - 1
"""The largest sequence a stream starts after: JetStream takes the next one as a uint64."""
_EVENT_ID = re.compile(r"[0-9]{1,19}")


def start_after(after: int, last_event_id: str | None) -> int:
    """The sequence a viewer's stream starts after: its ``Last-Event-ID`` when that is an event's
    id (a reconnecting browser's), else ``after`` within ``0..LAST_SEQUENCE``."""
    if last_event_id is not None and _EVENT_ID.fullmatch(last_event_id) and int(last_event_id) <= LAST_SEQUENCE:
        return int(last_event_id)
    return min(max(after, 0), LAST_SEQUENCE)


def event_stream(follow: AsyncIterator[StoredEvent | None], encoded: Callable[[StoredEvent], str]) -> StreamingResponse:
    """``follow``'s events as server-sent events, a comment for each keep-alive (``None``)."""

    async def body() -> AsyncIterator[str]:
        yield "retry: 1000\n\n"
        async for stored in follow:
            yield ": keep-alive\n\n" if stored is None else encoded(stored)

    return StreamingResponse(
        body(), media_type="text/event-stream", headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    )


class EncodedEvents:
    """``encode(stored)`` (an SSE message) by event sequence, kept for the most recent events."""

    def __init__(self, encode: Callable[[StoredEvent], str], size: int = CACHE_SIZE) -> None:
        self._encode = encode
        self._size = size
        self._cache: OrderedDict[int, str] = OrderedDict()

    def __call__(self, stored: StoredEvent) -> str:
        found = self._cache.get(stored.seq)
        if found is None:
            found = self._cache[stored.seq] = self._encode(stored)
            if len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return found
