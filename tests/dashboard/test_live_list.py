"""The thread list: its last activity, pull request and outcome columns (a finished run shows how
it ended, never "idle"), and its live stream of rows over a real HTTP server."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from drydock.bus import EventType
from drydock.roles import Role
from drydock.threads.pr_records import PullRequestRecord, PullRequestStore
from tests.dashboard.conftest import Person, Site
from tests.fakes.loopback import LoopbackServer

WAIT = 15.0


@pytest.fixture
async def served(site: Site) -> AsyncIterator[str]:
    async with LoopbackServer(site.app) as server:
        yield server.base_url


async def over_http(site: Site, base_url: str, user_id: str = "gh-2", login: str = "bob") -> Person:
    person = await site.session(user_id, login)
    person.client = httpx.AsyncClient(base_url=base_url, cookies=person.client.cookies, timeout=WAIT)
    site.clients.append(person.client)
    return person


class Stream:
    """The list's live stream, read as a browser's EventSource would."""

    def __init__(self, person: Person, url: str) -> None:
        self._person, self._url = person, url
        self.items: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.seen: list[dict[str, Any]] = []
        self._task: asyncio.Task[None] | None = None

    async def _read(self) -> None:
        async with self._person.client.stream("GET", self._url) as answer:
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith("text/event-stream")
            async for line in answer.aiter_lines():
                if line.startswith("data: "):
                    item = json.loads(line.removeprefix("data: "))
                    self.seen.append(item)
                    await self.items.put(item)

    async def __aenter__(self) -> Stream:
        self._task = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def next(self) -> dict[str, Any]:
        return await asyncio.wait_for(self.items.get(), WAIT)

    async def until(self, thread_id: str, text: str) -> dict[str, Any]:
        """The first row of ``thread_id`` whose HTML contains ``text`` (within the deadline)."""

        async def find() -> dict[str, Any]:
            while True:
                item = await self.items.get()
                if item["id"] == thread_id and text in item["html"]:
                    return item

        return await asyncio.wait_for(find(), WAIT)


class TestColumns:
    async def test_a_finished_run_shows_its_outcome_with_activity_and_pull_request(self, site: Site) -> None:
        thread_id = await site.thread(str(uuid.uuid4()), owner="gh-2")
        await site.emit(thread_id, EventType.STARTED)
        await site.emit(thread_id, EventType.COMPLETED, summary="done")
        await PullRequestStore(site.runtime.redis, site.runtime.keys).record(
            PullRequestRecord(host="github.com", repository="acme/widgets", number=12, thread_id=thread_id, branch="b")
        )
        bob = await site.session("gh-2", "bob")
        listed = (await bob.get("/api/v1/threads")).json()["threads"]
        [row] = [thread for thread in listed if thread["id"] == thread_id]
        assert (row["state"], row["outcome"]) == ("idle", "completed")
        assert row["last_activity"] > row["created_at"]
        assert row["pull_request"]["url"] == "https://github.com/acme/widgets/pull/12"
        page = (await bob.get("/threads")).text
        assert '<span class="state state-completed">completed</span>' in page
        assert "state-idle" not in page
        assert 'href="https://github.com/acme/widgets/pull/12">acme/widgets#12</a>' in page
        assert '<th scope="col">Last activity</th>' in page

    @pytest.mark.parametrize(("type", "shown"), [(EventType.ERROR, "failed"), (EventType.STOPPED, "stopped")])
    async def test_a_failed_or_stopped_run_says_so(self, site: Site, type: EventType, shown: str) -> None:
        thread_id = await site.thread(str(uuid.uuid4()), owner="gh-2")
        await site.emit(thread_id, EventType.STARTED)
        await site.emit(thread_id, type)
        page = (await (await site.session("gh-2", "bob")).get("/threads")).text
        assert page.count(f'<span class="state state-{shown}">{shown}</span>') == 2


class TestLiveList:
    async def test_a_listed_thread_moves_from_running_to_completed(self, site: Site, served: str) -> None:
        thread_id = await site.thread(str(uuid.uuid4()), owner="gh-2")
        await site.emit(thread_id, EventType.STARTED)
        bob = await over_http(site, served)
        page = (await bob.get("/threads")).text
        assert 'data-live-list="/threads/live?ids=' + thread_id in page
        async with Stream(bob, f"/threads/live?ids={thread_id}&new=1") as stream:
            now = await stream.next()
            assert (now["id"], now["new"]) == (thread_id, False)
            assert "state-running" in now["html"]
            await site.emit(thread_id, EventType.COMPLETED, summary="done")
            done = await stream.until(thread_id, "state-completed")
            assert done["html"].startswith(f'<tr data-thread="{thread_id}">')

    async def test_a_new_thread_appears_on_the_first_page_when_it_matches(self, site: Site, served: str) -> None:
        bob = await over_http(site, served)
        async with Stream(bob, "/threads/live?ids=&new=1&kind=coder") as stream:
            await asyncio.sleep(0.5)
            reviewer = await site.thread(str(uuid.uuid4()), owner="gh-2", kind=Role.REVIEWER)
            await site.emit(reviewer, EventType.STARTED)
            coder = await site.thread(str(uuid.uuid4()), owner="gh-2")
            await site.emit(coder, EventType.STARTED)
            added = await stream.until(coder, "state-running")
            assert added["new"] is True
            assert reviewer not in {item["id"] for item in stream.seen}

    async def test_threads_of_others_never_reach_the_stream(self, site: Site, served: str) -> None:
        bob = await over_http(site, served)
        async with Stream(bob, "/threads/live?ids=&new=1") as stream:
            await asyncio.sleep(0.5)
            hidden = await site.thread(str(uuid.uuid4()), owner="gh-9", repository="acme/secret")
            await site.emit(hidden, EventType.STARTED)
            mine = await site.thread(str(uuid.uuid4()), owner="gh-2")
            await site.emit(mine, EventType.STARTED)
            first = await stream.next()
            assert first["id"] == mine

    async def test_the_stream_needs_a_sign_in(self, site: Site) -> None:
        answer = await site.client().get("/threads/live?ids=")
        assert answer.status_code == 303
