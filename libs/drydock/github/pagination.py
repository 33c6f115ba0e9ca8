"""GitHub's pagination, once: 100 items a page, following the ``Link`` header's ``next``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from drydock.github.responses import Answer, Received, checked_list

PER_PAGE = 100

Fetch = Callable[[str, dict[str, str] | None], Awaitable[Received]]
"""Sends ``GET`` to a path or to an absolute URL (a ``next`` link), with the query given."""


async def pages(
    fetch: Fetch,
    path: str,
    doing: str,
    *,
    limit: int,
    field: str | None = None,
    params: dict[str, str] | None = None,
    until: Callable[[dict[str, Any]], bool] | None = None,
) -> list[dict[str, Any]]:
    """Every item of a listing, in GitHub's order, at most ``limit``; ``field`` names the array
    when GitHub answers with an object (``check_runs``, ``repositories``). With ``until``, the
    listing ends before the first item it holds true for (a listing of the newest first, read back
    to a date)."""
    found: list[dict[str, Any]] = []
    url: str | None = path
    query: dict[str, str] | None = (params or {}) | {"per_page": str(PER_PAGE)}
    while url is not None and len(found) < limit:
        response = await fetch(url, query)
        items = checked_list(response, doing, field)
        if until is not None:
            ended = next((index for index, item in enumerate(items) if until(item)), None)
            if ended is not None:
                return (found + items[:ended])[:limit]
        found += items
        # The next link carries the whole query, page number included.
        url, query = Answer.of(response).next_url, None
    return found[:limit]
