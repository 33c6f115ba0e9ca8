"""``web_search``: search the web through the provider named by ``DRYDOCK_TOOLS_SEARCH_PROVIDER``.
Without one the tool still exists and says how web search is turned on."""

from __future__ import annotations

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from drydock.search import SearchError, SearchResult, search_provider_from_settings
from drydock.tools.context import ToolContext

NAME = "web_search"
OFF = (
    "web search is off: no search provider is configured. An administrator turns it on with "
    "DRYDOCK_TOOLS_SEARCH_PROVIDER=brave plus DRYDOCK_TOOLS_SEARCH_API_KEY (a Brave Search API key), or "
    "DRYDOCK_TOOLS_SEARCH_PROVIDER=searxng plus DRYDOCK_TOOLS_SEARCH_URL (the instance's root URL)."
)


class WebSearchArgs(BaseModel):
    query: str = Field(min_length=1, max_length=400, description="What to search for.")
    count: int = Field(default=5, ge=1, le=20, description="How many results to return.")


def _listing(query: str, results: list[SearchResult]) -> str:
    if not results:
        return f"no results for {query!r}"
    entries = []
    for number, result in enumerate(results, 1):
        lines = [f"{number}. {result.title or result.url}", f"   {result.url}"]
        if result.snippet:
            lines.append(f"   {result.snippet}")
        entries.append("\n".join(lines))
    return "\n\n".join(entries)


def build(context: ToolContext) -> BaseTool:
    """The ``web_search`` tool; raises :class:`ValueError` when the provider settings are invalid."""
    provider = search_provider_from_settings(context.settings.tools, context.http)

    async def web_search(query: str, count: int = 5) -> str:
        if provider is None:
            return OFF
        try:
            results = await provider.search(query, count=count)
        except SearchError as error:
            return str(error)
        return _listing(query, results)

    return StructuredTool.from_function(
        coroutine=web_search,
        name=NAME,
        description=("Search the web. Returns titles, URLs and short snippets; read a result in full with fetch_url."),
        args_schema=WebSearchArgs,
    )
