from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from pydantic import SecretStr

from drydock.config import Settings, ToolSettings
from drydock.search import BraveSearch, SearxngSearch, search_provider_from_settings
from drydock.tools import web_search
from tests.fakes.search import Document, FakeSearch
from tests.tools.conftest import MakeContext, with_tools

KEY = "brave-test-key"
DOCUMENTS = [
    Document("Widgets installation guide", "https://widgets.example/install", "How to install widgets & gadgets"),
    Document("Widgets changelog", "https://widgets.example/changelog", "What changed in widgets 2.0"),
    Document("Gadgets", "https://gadgets.example/", "Unrelated gadgets"),
]


@pytest.fixture
async def search() -> AsyncIterator[FakeSearch]:
    async with FakeSearch(KEY, DOCUMENTS) as server:
        yield server


def brave(settings: Settings, search: FakeSearch, key: str = KEY) -> Settings:
    return with_tools(settings, search_provider="brave", search_url=search.base_url, search_api_key=key)


def searxng(settings: Settings, search: FakeSearch) -> Settings:
    return with_tools(settings, search_provider="searxng", search_url=search.base_url)


class TestUnconfigured:
    async def test_the_tool_says_how_to_turn_search_on(self, make_context: MakeContext) -> None:
        tool = web_search.build(make_context())
        answer = await tool.ainvoke({"query": "widgets"})
        assert answer.startswith("web search is off")
        assert "DRYDOCK_TOOLS_SEARCH_PROVIDER" in answer


class TestProviderSettings:
    async def test_unknown_provider_is_refused(self) -> None:
        async with httpx.AsyncClient() as http:
            with pytest.raises(ValueError, match="unknown search provider 'bing'"):
                search_provider_from_settings(ToolSettings(search_provider="bing"), http)

    async def test_brave_needs_a_key(self) -> None:
        async with httpx.AsyncClient() as http:
            with pytest.raises(ValueError, match="DRYDOCK_TOOLS_SEARCH_API_KEY"):
                search_provider_from_settings(ToolSettings(search_provider="brave"), http)

    async def test_searxng_needs_a_url(self) -> None:
        async with httpx.AsyncClient() as http:
            with pytest.raises(ValueError, match="DRYDOCK_TOOLS_SEARCH_URL"):
                search_provider_from_settings(ToolSettings(search_provider="searxng"), http)

    async def test_names_pick_their_provider(self) -> None:
        async with httpx.AsyncClient() as http:
            chosen = search_provider_from_settings(
                ToolSettings(search_provider="Brave", search_api_key=SecretStr("k")), http
            )
            assert isinstance(chosen, BraveSearch)
            chosen = search_provider_from_settings(
                ToolSettings(search_provider="searxng", search_url="http://searx.local"), http
            )
            assert isinstance(chosen, SearxngSearch)
            assert search_provider_from_settings(ToolSettings(), http) is None

    async def test_building_the_tool_with_a_bad_provider_fails(
        self, make_context: MakeContext, settings: Settings
    ) -> None:
        with pytest.raises(ValueError, match="unknown search provider"):
            web_search.build(make_context(with_tools(settings, search_provider="altavista")))


class TestBrave:
    async def test_results_are_listed_with_plain_snippets(
        self, make_context: MakeContext, settings: Settings, search: FakeSearch
    ) -> None:
        tool = web_search.build(make_context(brave(settings, search)))
        answer = await tool.ainvoke({"query": "install widgets", "count": 3})
        assert answer == (
            "1. Widgets installation guide\n   https://widgets.example/install\n   How to install widgets & gadgets"
        )
        assert search.state.queries == [{"q": "install widgets", "count": "3"}]

    async def test_no_match_is_an_answer(
        self, make_context: MakeContext, settings: Settings, search: FakeSearch
    ) -> None:
        tool = web_search.build(make_context(brave(settings, search)))
        assert await tool.ainvoke({"query": "zeppelins"}) == "no results for 'zeppelins'"

    async def test_count_caps_the_results(
        self, make_context: MakeContext, settings: Settings, search: FakeSearch
    ) -> None:
        tool = web_search.build(make_context(brave(settings, search)))
        answer = await tool.ainvoke({"query": "widgets", "count": 1})
        assert answer.startswith("1. Widgets installation guide")
        assert "2." not in answer

    async def test_an_invalid_key_is_reported(
        self, make_context: MakeContext, settings: Settings, search: FakeSearch
    ) -> None:
        tool = web_search.build(make_context(brave(settings, search, key="wrong")))
        answer = await tool.ainvoke({"query": "widgets"})
        assert answer == (
            "web search failed: Brave Search answered HTTP 422 "
            "(SUBSCRIPTION_TOKEN_INVALID: The provided subscription token is invalid.)"
        )

    async def test_rate_limiting_is_reported(
        self, make_context: MakeContext, settings: Settings, search: FakeSearch
    ) -> None:
        search.state.rate_limited = True
        tool = web_search.build(make_context(brave(settings, search)))
        answer = await tool.ainvoke({"query": "widgets"})
        assert answer == (
            "web search failed: Brave Search answered HTTP 429 "
            "(RATE_LIMITED: Request rate limit exceeded for plan.); try again later"
        )


class TestSearxng:
    async def test_results_are_listed(self, make_context: MakeContext, settings: Settings, search: FakeSearch) -> None:
        tool = web_search.build(make_context(searxng(settings, search)))
        answer = await tool.ainvoke({"query": "widgets", "count": 5})
        assert answer == (
            "1. Widgets installation guide\n   https://widgets.example/install\n   How to install widgets & gadgets\n\n"
            "2. Widgets changelog\n   https://widgets.example/changelog\n   What changed in widgets 2.0"
        )
        assert search.state.queries == [{"q": "widgets", "format": "json"}]

    async def test_count_caps_the_results(
        self, make_context: MakeContext, settings: Settings, search: FakeSearch
    ) -> None:
        tool = web_search.build(make_context(searxng(settings, search)))
        answer = await tool.ainvoke({"query": "widgets", "count": 1})
        assert "changelog" not in answer

    async def test_an_instance_without_json_says_what_to_enable(
        self, make_context: MakeContext, settings: Settings, search: FakeSearch
    ) -> None:
        search.state.json_format = False
        tool = web_search.build(make_context(searxng(settings, search)))
        answer = await tool.ainvoke({"query": "widgets"})
        assert answer.startswith("web search failed: SearXNG answered HTTP 403 Forbidden")
        assert "search.formats" in answer

    async def test_rate_limiting_is_reported(
        self, make_context: MakeContext, settings: Settings, search: FakeSearch
    ) -> None:
        search.state.rate_limited = True
        tool = web_search.build(make_context(searxng(settings, search)))
        answer = await tool.ainvoke({"query": "widgets"})
        assert answer == "web search failed: SearXNG answered HTTP 429 Too Many Requests; try again later"

    async def test_an_unreachable_instance_is_reported(self, make_context: MakeContext, settings: Settings) -> None:
        async with FakeSearch() as gone:
            url = gone.base_url
        tool = web_search.build(make_context(with_tools(settings, search_provider="searxng", search_url=url)))
        answer = await tool.ainvoke({"query": "widgets"})
        assert answer.startswith("web search failed: could not reach SearXNG (ConnectError")
