"""The live event stream: server-sent events over a real HTTP server, the thread's history first
and then each new event as the worker publishes it; a reconnecting viewer continues after the
last event it saw; the page's stream carries rendered fragments."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from drydock.bus import EventType
from tests.dashboard.conftest import Person, Site, SiteFactory
from tests.fakes.loopback import LoopbackServer


@pytest.fixture
async def served(site: Site) -> AsyncIterator[str]:
    async with LoopbackServer(site.app) as server:
        yield server.base_url


async def events(
    person: Person, url: str, count: int, headers: dict[str, str] | list[tuple[bytes, bytes]] | None = None
) -> list[dict[str, Any]]:
    """The first ``count`` events of the stream at ``url`` (with their ``id`` and ``event`` lines)."""
    found: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    async with person.client.stream("GET", url, headers=headers or {}) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        async for line in answer.aiter_lines():
            if line.startswith(("id: ", "event: ")):
                name, _, value = line.partition(": ")
                current[name] = value
            elif line.startswith("data: "):
                current["data"] = json.loads(line.removeprefix("data: "))
            elif line == "" and "data" in current:
                found.append(current)
                current = {}
                if len(found) == count:
                    return found
    raise AssertionError("the stream ended")


async def viewer(site: Site, base_url: str) -> tuple[Person, str]:
    thread_id = await site.thread(str(uuid.uuid4()), owner="gh-2")
    person = await site.session("gh-2", "bob")
    person.client = httpx.AsyncClient(base_url=base_url, cookies=person.client.cookies, timeout=10)
    site.clients.append(person.client)
    return person, thread_id


class TestStream:
    async def test_history_then_live_events(self, site: Site, served: str) -> None:
        bob, thread_id = await viewer(site, served)
        await site.emit(thread_id, EventType.STARTED, model="gpt-5.1")
        watching = asyncio.create_task(events(bob, f"/api/v1/threads/{thread_id}/events/stream", 2))
        await asyncio.sleep(0.3)
        await site.emit(thread_id, EventType.COMPLETED, summary="done")
        started, completed = await asyncio.wait_for(watching, 10)
        assert (started["data"]["type"], started["data"]["state"]) == ("started", "running")
        assert (completed["data"]["type"], completed["data"]["data"]) == ("completed", {"summary": "done"})
        assert int(completed["id"]) > int(started["id"]) == started["data"]["seq"]

    async def test_a_reconnecting_viewer_continues_after_the_last_event_it_saw(self, site: Site, served: str) -> None:
        bob, thread_id = await viewer(site, served)
        for step in range(3):
            await site.emit(thread_id, EventType.TOOL_CALL, name=f"step-{step}")
        first = (await events(bob, f"/api/v1/threads/{thread_id}/events/stream", 1))[0]
        rest = await events(bob, f"/api/v1/threads/{thread_id}/events/stream", 2, {"Last-Event-ID": first["id"]})
        assert [event["data"]["data"]["name"] for event in rest] == ["step-1", "step-2"]

    async def test_the_page_stream_carries_fragments(self, site: Site, served: str) -> None:
        bob, thread_id = await viewer(site, served)
        url = "https://github.com/acme/widgets/pull/3"
        await site.emit(thread_id, EventType.MESSAGE_POSTED, channel="github", target="acme/widgets#3", url=url)
        [posted] = await events(bob, f"/threads/{thread_id}/live", 1)
        assert posted["event"] == "run"
        assert (posted["data"]["type"], posted["data"]["run"]) == ("message_posted", "run-1")
        assert f'<a href="{url}">' in posted["data"]["html"]

    async def test_a_run_block_then_steps_and_what_the_working_indicator_says(self, site: Site, served: str) -> None:
        bob, thread_id = await viewer(site, served)
        await site.emit(thread_id, EventType.STARTED, model="gpt-5.1", sandbox_id="sbx-1")
        await site.emit(thread_id, EventType.MODEL_CALL, text="", tool_calls=["execute"])
        await site.emit(thread_id, EventType.TOOL_CALL, name="execute", status="success", arguments='{"command": "ls"}',
                        output="calc.py", exit_code=0)  # fmt: skip
        await site.emit(thread_id, EventType.COMPLETED, summary="Listed.")
        items = [item["data"] for item in await events(bob, f"/threads/{thread_id}/live", 4)]
        assert [item["type"] for item in items] == ["started", "model_call", "tool_call", "completed"]
        assert 'data-run="run-1"' in items[0]["html"]
        assert items[1]["html"] == ""
        assert '<code class="command">$ ls</code>' in items[2]["html"]
        assert [item["working"] for item in items] == ["Thinking…", "Running execute…", "Thinking…", None]
        assert [item["ended"] for item in items] == [False, False, False, True]

    async def test_fragments_are_escaped(self, site: Site, served: str) -> None:
        bob, thread_id = await viewer(site, served)
        await site.emit(thread_id, EventType.MODEL_CALL, text="<script>alert(1)</script>", tool_calls=[])
        [call] = await events(bob, f"/threads/{thread_id}/live", 1)
        assert "<script>" not in call["data"]["html"]
        assert "&lt;script&gt;" in call["data"]["html"]

    async def test_a_stream_ends_after_its_lifetime(self, site_factory: SiteFactory) -> None:
        site = await site_factory(dashboard={"event_stream_lifetime": 0.5, "event_heartbeat": 0.2})
        async with LoopbackServer(site.app) as server:
            bob, thread_id = await viewer(site, server.base_url)
            lines = []
            async with bob.client.stream("GET", f"/api/v1/threads/{thread_id}/events/stream") as answer:
                async for line in answer.aiter_lines():
                    lines.append(line)
            assert lines[0] == "retry: 1000"
            assert ": keep-alive" in lines

    async def test_someone_who_may_not_see_the_thread_gets_403(self, site: Site, served: str) -> None:
        thread_id = await site.thread(str(uuid.uuid4()), repository="acme/secret")
        bob = await site.session("gh-2", "bob")
        async with httpx.AsyncClient(base_url=served, cookies=bob.client.cookies) as client:
            assert (await client.get(f"/api/v1/threads/{thread_id}/events/stream")).status_code == 403
            assert (await client.get(f"/threads/{thread_id}/live")).status_code == 403
