"""Server-sent events: an event encoded once for all of its viewers in this process."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from services.dashboard.threads.events import StoredEvent

CACHE_SIZE = 4096


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
