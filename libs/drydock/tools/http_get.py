"""``http_get``: a read-only ``http_request`` (GET only) to a host on ``DRYDOCK_TOOLS_HTTP_ALLOWLIST``,
for roles that may read but not change anything."""

from __future__ import annotations

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from drydock.tools import http_request
from drydock.tools.context import ToolContext

NAME = "http_get"


class HttpGetArgs(BaseModel):
    url: str = Field(description="The full http(s) URL; its host must be on the allowlist.")
    headers: dict[str, str] | None = Field(default=None, description="Request headers to send.")


def build(context: ToolContext) -> BaseTool:
    """The ``http_get`` tool; raises :class:`ValueError` for an unreadable allowlist entry."""
    request = http_request.build(context)

    async def http_get(url: str, headers: dict[str, str] | None = None) -> str:
        return str(await request.ainvoke({"url": url, "method": "GET", "headers": headers}))

    return StructuredTool.from_function(
        coroutine=http_get,
        name=NAME,
        description=(
            "GET a URL of an API on the administrator's allowlist (read only). Returns the status, a few "
            "headers and the response body (cut at a size limit). No credentials are added for you."
        ),
        args_schema=HttpGetArgs,
    )
