"""Web search providers behind one protocol: the Brave Search API and a SearXNG instance,
chosen by ``DRYDOCK_TOOLS_SEARCH_PROVIDER``."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import httpx

from drydock.config import ToolSettings

BRAVE_URL = "https://api.search.brave.com"
BRAVE_MAX_COUNT = 20
_TAG = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class SearchResult:
    title: str
    url: str
    snippet: str


class SearchError(Exception):
    """The provider did not answer with results; the message is written for the model."""


class SearchProvider(Protocol):
    async def search(self, query: str, *, count: int) -> list[SearchResult]:
        """Up to ``count`` results for ``query``; raises :class:`SearchError`."""
        ...


def _plain(markup: object) -> str:
    return html.unescape(_TAG.sub("", markup)).strip() if isinstance(markup, str) else ""


def _results(items: object, snippet_key: str, count: int) -> list[SearchResult]:
    if not isinstance(items, list):
        return []
    found = [
        SearchResult(_plain(item.get("title")), str(item["url"]), _plain(item.get(snippet_key)))
        for item in items
        if isinstance(item, dict) and isinstance(item.get("url"), str)
    ]
    return found[:count]


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


async def _get(
    http: httpx.AsyncClient, provider: str, url: str, *, params: dict[str, str], headers: dict[str, str], within: float
) -> httpx.Response:
    try:
        return await http.get(url, params=params, headers=headers, timeout=within)
    except httpx.HTTPError as error:
        raise SearchError(f"web search failed: could not reach {provider} ({type(error).__name__}: {error})") from None


def _brave_reason(response: httpx.Response) -> str:
    payload = _json(response)
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(payload, dict) and isinstance(payload.get("errors"), list) and payload["errors"]:
        error = payload["errors"][0]
    if isinstance(error, dict) and error.get("code"):
        return f"{error['code']}: {error.get('detail', '')}".rstrip(": ")
    return response.reason_phrase


class BraveSearch:
    """The Brave Search API's web search (``GET /res/v1/web/search``)."""

    name: ClassVar[str] = "Brave Search"

    def __init__(self, http: httpx.AsyncClient, *, api_key: str, base_url: str = BRAVE_URL, timeout: float) -> None:
        self._http = http
        self._api_key = api_key
        self._url = base_url.rstrip("/") + "/res/v1/web/search"
        self._timeout = timeout

    async def search(self, query: str, *, count: int) -> list[SearchResult]:
        count = max(1, min(count, BRAVE_MAX_COUNT))
        response = await _get(
            self._http,
            self.name,
            self._url,
            params={"q": query, "count": str(count)},
            headers={"X-Subscription-Token": self._api_key, "Accept": "application/json"},
            within=self._timeout,
        )
        if response.is_error:
            hint = "; try again later" if response.status_code == 429 else ""
            raise SearchError(
                f"web search failed: {self.name} answered HTTP {response.status_code} ({_brave_reason(response)}){hint}"
            )
        payload = _json(response)
        if not isinstance(payload, dict):
            raise SearchError(f"web search failed: {self.name} answered with something other than JSON")
        # Brave leaves out the "web" section when nothing matched.
        web = payload.get("web")
        return _results(web.get("results") if isinstance(web, dict) else [], "description", count)


class SearxngSearch:
    """A SearXNG instance's JSON API (``GET /search?format=json``); the instance must list
    ``json`` under ``search.formats``."""

    name: ClassVar[str] = "SearXNG"

    def __init__(self, http: httpx.AsyncClient, *, base_url: str, timeout: float) -> None:
        self._http = http
        self._url = base_url.rstrip("/") + "/search"
        self._timeout = timeout

    async def search(self, query: str, *, count: int) -> list[SearchResult]:
        response = await _get(
            self._http,
            self.name,
            self._url,
            params={"q": query, "format": "json"},
            headers={"Accept": "application/json"},
            within=self._timeout,
        )
        if response.status_code == 403:
            raise SearchError(
                f"web search failed: {self.name} answered HTTP 403 {response.reason_phrase}; the instance must allow "
                "the json format (search.formats in its settings.yml)"
            )
        if response.is_error:
            hint = "; try again later" if response.status_code == 429 else ""
            raise SearchError(
                f"web search failed: {self.name} answered HTTP {response.status_code} {response.reason_phrase}{hint}"
            )
        payload = _json(response)
        if not isinstance(payload, dict):
            raise SearchError(f"web search failed: {self.name} answered with something other than JSON")
        return _results(payload.get("results"), "content", count)


def search_provider_from_settings(tools: ToolSettings, http: httpx.AsyncClient) -> SearchProvider | None:
    """The configured provider, None when web search is off; raises :class:`ValueError` for an
    unknown provider or one missing its key or URL."""
    if tools.search_provider is None:
        return None
    match tools.search_provider.strip().lower():
        case "brave":
            if tools.search_api_key is None or not tools.search_api_key.get_secret_value():
                raise ValueError("DRYDOCK_TOOLS_SEARCH_API_KEY is required for the brave search provider")
            return BraveSearch(
                http,
                api_key=tools.search_api_key.get_secret_value(),
                base_url=tools.search_url or BRAVE_URL,
                timeout=tools.timeout,
            )
        case "searxng":
            if not tools.search_url:
                raise ValueError(
                    "DRYDOCK_TOOLS_SEARCH_URL is required for the searxng search provider (the instance's root URL)"
                )
            return SearxngSearch(http, base_url=tools.search_url, timeout=tools.timeout)
        case other:
            raise ValueError(f"DRYDOCK_TOOLS_SEARCH_PROVIDER: unknown search provider {other!r}; use brave or searxng")
