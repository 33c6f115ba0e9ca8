"""A test double of two web search APIs on one server: the Brave Search API's web search and a
SearXNG instance's JSON API.

As Brave does, ``GET /res/v1/web/search`` takes the key in ``X-Subscription-Token`` and answers
an invalid key with 422 ``SUBSCRIPTION_TOKEN_INVALID`` (not 401), a missing key or bad parameter
with 422 ``VALIDATION``, a throttled key with 429 ``RATE_LIMITED``; errors are
``{"type": "ErrorResponse", "error": {...}}``, and a query nothing matches has no ``web`` section.
As SearXNG does, ``GET /search`` answers ``format=json`` with 403 when the instance does not
enable that format, and its limiter answers 429 in plain text.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse

from tests.fakes.loopback import LoopbackServer

BRAVE_MAX_COUNT = 20


@dataclass(frozen=True)
class Document:
    title: str
    url: str
    text: str


@dataclass
class SearchState:
    api_key: str
    documents: list[Document] = field(default_factory=list)
    rate_limited: bool = False
    """Both APIs answer 429 while set."""
    json_format: bool = True
    """SearXNG's ``search.formats`` includes json."""
    queries: list[dict[str, str]] = field(default_factory=list)
    """Query parameters of every search request, in order."""

    def matching(self, query: str) -> list[Document]:
        words = query.lower().split()
        return [d for d in self.documents if all(w in f"{d.title} {d.text}".lower() for w in words)]


def _brave_error(status: int, code: str, detail: str, component: str, **headers: str) -> JSONResponse:
    error = {
        "id": str(uuid.uuid4()),
        "status": status,
        "code": code,
        "detail": detail,
        "meta": {"component": component},
    }
    return JSONResponse({"type": "ErrorResponse", "error": error, "time": int(time.time())}, status, headers=headers)


def _highlight(text: str, query: str) -> str:
    words = {w.lower() for w in query.split()}
    return " ".join(f"<strong>{w}</strong>" if w.lower() in words else w for w in text.split())


def _brave_result(document: Document, query: str) -> dict[str, Any]:
    parts = urlsplit(document.url)
    return {
        "type": "search_result",
        "title": document.title,
        "url": document.url,
        "is_source_local": False,
        "is_source_both": False,
        "description": _highlight(document.text, query),
        "language": "en",
        "family_friendly": True,
        "profile": {"name": parts.hostname, "url": document.url, "long_name": parts.hostname},
        "meta_url": {"scheme": parts.scheme, "netloc": parts.netloc, "hostname": parts.hostname, "path": parts.path},
    }


def _searxng_result(document: Document, position: int) -> dict[str, Any]:
    return {
        "url": document.url,
        "title": document.title,
        "content": document.text,
        "engine": "duckduckgo",
        "parsed_url": [*urlsplit(document.url), ""],
        "template": "default.html",
        "engines": ["duckduckgo"],
        "positions": [position],
        "score": 1.0 / position,
        "category": "general",
    }


def create_app(state: SearchState) -> FastAPI:
    app = FastAPI(title="Fake web search")

    @app.get("/res/v1/web/search")
    async def brave(request: Request) -> JSONResponse:
        state.queries.append(dict(request.query_params))
        token = request.headers.get("x-subscription-token")
        if not token:
            return _brave_error(422, "VALIDATION", "Unable to validate request parameter(s)", "validation")
        if token != state.api_key:
            return _brave_error(
                422, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid.", "authentication"
            )
        if state.rate_limited:
            limits = {
                "X-RateLimit-Limit": "1, 15000",
                "X-RateLimit-Remaining": "0, 14000",
                "X-RateLimit-Reset": "1, 86400",
            }
            return _brave_error(429, "RATE_LIMITED", "Request rate limit exceeded for plan.", "rate_limiter", **limits)
        query = request.query_params.get("q", "")
        count = request.query_params.get("count", "20")
        if not query or not count.isdigit() or not 1 <= int(count) <= BRAVE_MAX_COUNT:
            return _brave_error(422, "VALIDATION", "Unable to validate request parameter(s)", "validation")
        found = state.matching(query)[: int(count)]
        payload: dict[str, Any] = {
            "type": "search",
            "query": {"original": query, "show_strict_warning": False, "more_results_available": False},
            "mixed": {"type": "mixed", "main": [{"type": "web", "index": i, "all": False} for i in range(len(found))]},
        }
        if found:
            payload["web"] = {
                "type": "search",
                "results": [_brave_result(d, query) for d in found],
                "family_friendly": True,
            }
        return JSONResponse(payload)

    @app.get("/search", response_model=None)
    async def searxng(request: Request) -> JSONResponse | HTMLResponse | PlainTextResponse:
        state.queries.append(dict(request.query_params))
        if state.rate_limited:
            return PlainTextResponse("Too Many Requests", 429)
        output = request.query_params.get("format", "html")
        if output != "json" or not state.json_format:
            return HTMLResponse("<!doctype html><title>403 Forbidden</title><h1>Forbidden</h1>", 403)
        query = request.query_params.get("q", "")
        if not query:
            return JSONResponse({"error": "No query"}, 400)
        found = state.matching(query)
        return JSONResponse(
            {
                "query": query,
                "number_of_results": 0,
                "results": [_searxng_result(d, i) for i, d in enumerate(found, 1)],
                "answers": [],
                "corrections": [],
                "infoboxes": [],
                "suggestions": [],
                "unresponsive_engines": [],
            }
        )

    return app


class FakeSearch(LoopbackServer):
    """``async with FakeSearch(key) as search:`` serves Brave at ``search.base_url`` (the API root
    given as ``search_url``) and SearXNG at the same root."""

    def __init__(self, api_key: str = "brave-test-key", documents: list[Document] | None = None) -> None:
        self.state = SearchState(api_key, list(documents or []))
        super().__init__(create_app(self.state))
