"""``http_request``: an approved network request to a host on ``DRYDOCK_TOOLS_HTTP_ALLOWLIST``.

The model may pass its own headers (an API key for an allowlisted API is legitimate); Drydock
never adds a credential of its own. Every redirect hop must be on the allowlist too.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

import httpx
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, BeforeValidator, Field, JsonValue

from drydock.credentials.allowlist import Allowlist, AllowlistError
from drydock.tools.context import ToolContext
from drydock.tools.netguard import Fetched, FetchError, Refused, guarded_fetch, text_of

NAME = "http_request"
SETTING = "DRYDOCK_TOOLS_HTTP_ALLOWLIST"
_SHOWN_HEADERS = ("content-type", "location", "retry-after", "www-authenticate", "link")

Method = Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]


def _upper(value: object) -> object:
    return value.upper() if isinstance(value, str) else value


class HttpRequestArgs(BaseModel):
    method: Annotated[Method, BeforeValidator(_upper)] = Field(default="GET", description="The HTTP method.")
    url: str = Field(description="The full http(s) URL; its host must be on the allowlist.")
    headers: dict[str, str] | None = Field(default=None, description="Request headers to send.")
    body: str | None = Field(default=None, description="A raw request body (set content-type in headers).")
    json_body: JsonValue | None = Field(default=None, description="A JSON request body, sent as application/json.")


def _port(url: httpx.URL) -> int:
    return url.port or (443 if url.scheme == "https" else 80)


def _describe(fetched: Fetched, requested: str) -> str:
    lines = [f"HTTP {fetched.status_code} {fetched.reason}".rstrip()]
    if str(fetched.url) != requested:
        lines.append(f"final URL: {fetched.url}")
    lines += [f"{name}: {fetched.headers[name]}" for name in _SHOWN_HEADERS if name in fetched.headers]
    text = text_of(fetched)
    if text is None:
        content_type = fetched.headers.get("content-type", "unknown type")
        size = f"{len(fetched.body)}{' or more' if fetched.truncated else ''}"
        lines += ["", f"[binary content ({content_type}), {size} bytes, not shown]"]
        return "\n".join(lines)
    if text:
        lines += ["", text]
    if fetched.truncated:
        lines.append(f"[body truncated at {len(fetched.body)} bytes]")
    return "\n".join(lines)


def build(context: ToolContext) -> BaseTool:
    """The ``http_request`` tool; raises :class:`ValueError` for an unreadable allowlist entry."""
    tools = context.settings.tools
    entries = tools.http_allowlist
    try:
        allowlist = Allowlist(entries)
    except AllowlistError as error:
        raise ValueError(f"{SETTING}: {error}") from None

    def permit(url: httpx.URL) -> None:
        if not allowlist.allows(url.host, _port(url)):
            raise Refused(
                f"refused: {url.host}:{_port(url)} is not on the http_request allowlist "
                f"(allowed: {', '.join(entries)}). An administrator can add it to {SETTING}."
            )

    async def http_request(
        url: str,
        method: Method = "GET",
        headers: dict[str, str] | None = None,
        body: str | None = None,
        json_body: JsonValue | None = None,
    ) -> str:
        if not entries:
            return (
                f"http_request is off: no host is on its allowlist. An administrator enables it by listing hosts "
                f"in {SETTING} (host, host:port or *.domain). To read a web page, use fetch_url."
            )
        if body is not None and json_body is not None:
            return "give either body or json_body, not both"
        sent = dict(headers or {})
        content = body.encode() if body is not None else None
        if json_body is not None:
            content = json.dumps(json_body).encode()
            if not any(name.lower() == "content-type" for name in sent):
                sent["content-type"] = "application/json"
        try:
            fetched = await guarded_fetch(
                context.http, method, url, tools=tools, headers=sent, content=content, permit=permit
            )
        except FetchError as error:
            return str(error)
        return _describe(fetched, url)

    return StructuredTool.from_function(
        coroutine=http_request,
        name=NAME,
        description=(
            "Make an HTTP request (GET, POST, PUT, PATCH, DELETE, HEAD) to an API on the administrator's "
            "allowlist. Returns the status, a few headers and the response body (cut at a size limit). "
            "Pass any header the API needs yourself; no credentials are added for you."
        ),
        args_schema=HttpRequestArgs,
    )
