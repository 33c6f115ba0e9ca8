"""Shared parts of the tool tests: a :class:`ToolContext` on the real bus and Valkey, for the
thread of the ``thread_id`` fixture, built as the worker builds it for a coder run; and a small
web site on loopback for the network tools to reach."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, Protocol

import httpx
import pytest
from fastapi import FastAPI, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, StreamingResponse
from redis.asyncio import Redis

from drydock.bus import Bus
from drydock.bus.envelopes import Channel, ReplyAddress
from drydock.channels.outbound import Outbound
from drydock.config import Settings, ToolSettings
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.threads.scope import ThreadScope
from drydock.tools.context import ToolContext
from tests.fakes.loopback import LoopbackServer

RUN_ID = "run-test"
REPOSITORY = "acme/widgets"


def with_tools(settings: Settings, **tools: Any) -> Settings:
    """``settings`` with its ``tools`` section built from ``tools`` (validated, like the environment)."""
    return settings.model_copy(update={"tools": ToolSettings(**tools)})


def github_reply_to(repository: str = REPOSITORY, number: int = 7) -> ReplyAddress:
    return ReplyAddress(
        channel=Channel.GITHUB, address={"host": "github.com", "repository": repository, "number": str(number)}
    )


class MakeContext(Protocol):
    def __call__(
        self,
        settings: Settings | None = None,
        *,
        repository: str | None = REPOSITORY,
        reply_to: ReplyAddress | None = None,
        user_id: str | None = None,
        outbound: Outbound | None = None,
    ) -> ToolContext: ...


@pytest.fixture
async def tool_http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


@pytest.fixture
def make_context(
    settings: Settings, bus: Bus, redis: Redis, keys: Keys, thread_id: str, tool_http: httpx.AsyncClient
) -> MakeContext:
    """Builds the context of a coder run of the ``thread_id`` thread; ``settings`` defaults to the
    session's, ``reply_to`` to an issue of ``repository``, ``outbound`` to no channel clients."""

    session_settings = settings

    def make(
        settings: Settings | None = None,
        *,
        repository: str | None = REPOSITORY,
        reply_to: ReplyAddress | None = None,
        user_id: str | None = None,
        outbound: Outbound | None = None,
    ) -> ToolContext:
        scope = ThreadScope(
            thread_id=thread_id,
            run_id=RUN_ID,
            role=Role.CODER,
            repository=repository,
            reply_to=reply_to or github_reply_to(repository or REPOSITORY),
            user_id=user_id,
        )
        return ToolContext(
            scope=scope,
            settings=settings or session_settings,
            bus=bus,
            redis=redis,
            keys=keys,
            outbound=outbound or Outbound({}, {}, []),
            http=tool_http,
        )

    return make


PAGE = """<!doctype html>
<html><head><title>Widgets  manual</title><style>body { color: red; }</style>
<script>var secret = "do-not-show";</script></head>
<body><nav><a href="#main">skip</a></nav>
<h1>Installing widgets</h1>
<p>Run the <code>widgets install</code> command, then read the <a href="/guide?step=2">next step</a>.</p>
<ul><li>fast</li><li>small &amp; safe</li></ul>
<pre>widgets install
widgets check</pre>
<noscript>enable scripts</noscript>
</body></html>"""
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
LARGE_SIZE = 50_000


def create_site() -> FastAPI:
    """Pages for the network tools: HTML, JSON, text, a large body, binary content, redirects,
    an echo of the request, a slow answer, and a cookie setter."""
    app = FastAPI(title="Test site")

    @app.get("/page")
    async def page() -> HTMLResponse:
        return HTMLResponse(PAGE)

    @app.get("/data.json")
    async def data() -> JSONResponse:
        return JSONResponse({"name": "widgets", "count": 3})

    @app.get("/notes.txt")
    async def notes() -> PlainTextResponse:
        return PlainTextResponse("line one\nline two\n")

    @app.get("/large")
    async def large() -> StreamingResponse:
        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(LARGE_SIZE // 1000):
                yield b"x" * 999 + b"\n"

        return StreamingResponse(chunks(), media_type="text/plain")

    @app.get("/logo.png")
    async def logo() -> Response:
        return Response(PNG, media_type="image/png")

    @app.api_route("/redirect", methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"])
    async def redirect(to: str, status: int = 302) -> RedirectResponse:
        return RedirectResponse(to, status_code=status)

    @app.get("/hops/{remaining}")
    async def hops(remaining: int) -> Response:
        if remaining > 0:
            return RedirectResponse(f"/hops/{remaining - 1}", status_code=302)
        return PlainTextResponse("arrived")

    @app.get("/status/{code}")
    async def status(code: int) -> PlainTextResponse:
        return PlainTextResponse(f"answered {code}", status_code=code)

    @app.get("/set-cookie")
    async def set_cookie() -> PlainTextResponse:
        response = PlainTextResponse("cookie set")
        response.set_cookie("session", "site-secret")
        return response

    @app.get("/slow")
    async def slow() -> PlainTextResponse:
        await asyncio.sleep(5)
        return PlainTextResponse("late")

    @app.api_route("/echo", methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"])
    async def echo(request: Request) -> JSONResponse:
        body = await request.body()
        return JSONResponse(
            {
                "method": request.method,
                "url": str(request.url),
                "headers": dict(request.headers.items()),
                "body": body.decode(),
            },
            headers={"x-echo": "1", "link": '<https://example.com/?page=2>; rel="next"'},
        )

    return app


@pytest.fixture
async def site() -> AsyncIterator[LoopbackServer]:
    """The :func:`create_site` pages at ``site.base_url`` (``http://127.0.0.1:PORT``)."""
    async with LoopbackServer(create_site()) as server:
        yield server


def echoed(text: str) -> dict[str, Any]:
    """The JSON body the site's ``/echo`` returned, from a tool's answer."""
    decoded: dict[str, Any] = json.loads(text[text.index("{") :])
    return decoded
