"""The model double's record of requests: kept in order for tests to read, counted apart so that a
long benchmark can forget them and still count every call."""

from __future__ import annotations

import asyncio

import httpx

from tests.fakes.openai_server import Script, ScriptedModelServer


async def _ask(client: httpx.AsyncClient, server: ScriptedModelServer, text: str) -> None:
    response = await client.post(
        f"{server.base_url}/chat/completions",
        json={"model": "gpt-5.1", "messages": [{"role": "user", "content": text}]},
    )
    assert response.status_code == 200, response.text


async def test_forgotten_requests_are_still_counted() -> None:
    script = Script().reply("one").reply("two").reply("three")
    async with ScriptedModelServer(script) as server, httpx.AsyncClient() as client:
        await _ask(client, server, "first")
        await _ask(client, server, "second")
        server.forget_requests()
        await _ask(client, server, "third")

        assert server.received == 3
        assert [request.texts("user") for request in server.requests] == [["third"]]
        async with asyncio.timeout(5):
            await server.wait_for_requests(3)
