"""GitHub's pagination: ``per_page`` (default 30, at most 100) and ``page``, with the ``Link``
header naming the next, last, first and previous pages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from fastapi import Request

T = TypeVar("T")


def paginate(request: Request, items: Sequence[T]) -> tuple[list[T], dict[str, str]]:
    """The requested page of ``items`` and the headers to answer with."""
    try:
        per_page = max(1, min(100, int(request.query_params.get("per_page", "30"))))
        page = max(1, int(request.query_params.get("page", "1")))
    except ValueError:
        per_page, page = 30, 1
    last = max(1, -(-len(items) // per_page))
    chosen = list(items[(page - 1) * per_page : page * per_page])

    def url(number: int) -> str:
        return str(request.url.include_query_params(per_page=per_page, page=number))

    links = []
    if page < last:
        links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
    if page > 1:
        links += [f'<{url(1)}>; rel="first"', f'<{url(page - 1)}>; rel="prev"']
    return chosen, ({"Link": ", ".join(links)} if links else {})
