"""``update_pull_request`` against the fake GitHub: changing the thread's own pull request, the
record's state following GitHub's, and refusing pull requests the thread did not open."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain_core.tools import BaseTool
from redis.asyncio import Redis

from drydock.channels.outbound import Outbound
from drydock.config import Settings
from drydock.effects import bound_call
from drydock.infra.redis import Keys
from drydock.threads.pr_records import PullRequestState, PullRequestStore
from drydock.tools import open_pull_request, update_pull_request
from drydock.tools.context import ToolContext
from tests.fakes.github.state import PullRequest
from tests.tools.channel_fixtures import GithubWorld, github_world
from tests.tools.conftest import MakeContext

HOST = "github.com"


@pytest.fixture(scope="module")
async def github() -> AsyncIterator[GithubWorld]:
    async with github_world() as world:
        yield world


@pytest.fixture
async def outbound(settings: Settings, github: GithubWorld) -> AsyncIterator[Outbound]:
    clients = Outbound.from_settings(github.settings(settings))
    yield clients
    await clients.aclose()


@pytest.fixture
def context(github: GithubWorld, outbound: Outbound, settings: Settings, make_context: MakeContext) -> ToolContext:
    repo = f"acme/widgets-{uuid.uuid4().hex[:8]}"
    github.fake.state.repository(repo)
    return make_context(github.settings(settings), repository=repo, outbound=outbound)


@pytest.fixture
def tool(context: ToolContext) -> BaseTool:
    return update_pull_request.build(context)


async def open_one(context: ToolContext, head: str = "drydock/abc-fix") -> int:
    result: dict[str, Any] = await open_pull_request.build(context).ainvoke({"title": "Fix", "head": head})
    return int(result["number"])


def pull(github: GithubWorld, context: ToolContext, number: int) -> PullRequest:
    assert context.scope.repository is not None
    return github.fake.state.pulls[(context.scope.repository.lower(), number)]


class TestChanges:
    async def test_title_and_body_of_the_thread_s_only_pull_request(
        self, github: GithubWorld, context: ToolContext, tool: BaseTool
    ) -> None:
        number = await open_one(context)

        result = await tool.ainvoke({"title": "Fix the widget", "body": "Now with tests."})

        changed = pull(github, context, number)
        assert (changed.title, changed.body) == ("Fix the widget", "Now with tests.")
        assert (result["number"], result["title"], result["state"]) == (number, "Fix the widget", "open")

    async def test_closing_and_reopening_moves_the_record_along(
        self, github: GithubWorld, context: ToolContext, tool: BaseTool, redis: Redis, keys: Keys
    ) -> None:
        number = await open_one(context)
        records = PullRequestStore(redis, keys)
        assert context.scope.repository is not None

        await tool.ainvoke({"state": "closed"})

        assert pull(github, context, number).state == "closed"
        record = await records.find(HOST, context.scope.repository, number)
        assert record is not None
        assert record.state is PullRequestState.CLOSED
        assert number not in [r.number for r in await records.open_records()]

        await tool.ainvoke({"number": number, "state": "open"})

        record = await records.find(HOST, context.scope.repository, number)
        assert record is not None
        assert record.state is PullRequestState.OPEN

    async def test_the_base_branch(self, github: GithubWorld, context: ToolContext, tool: BaseTool) -> None:
        number = await open_one(context)

        await tool.ainvoke({"base": "release"})

        assert pull(github, context, number).base_ref == "release"


class TestRefusals:
    async def test_a_pull_request_the_thread_did_not_open(
        self, github: GithubWorld, context: ToolContext, tool: BaseTool, outbound: Outbound
    ) -> None:
        assert outbound.github is not None
        assert context.scope.repository is not None
        person = github.fake.user_token("octocat", [context.scope.repository])
        theirs = await outbound.github.create_pull(
            f"token {person.token}", context.scope.repository, title="Theirs", head="feature", base="main"
        )

        answer = await tool.ainvoke({"number": theirs["number"], "title": "Mine now"})

        assert "was not opened by this thread" in answer
        assert pull(github, context, theirs["number"]).title == "Theirs"

    async def test_nothing_to_change(self, context: ToolContext, tool: BaseTool) -> None:
        await open_one(context)

        answer = await tool.ainvoke({})

        assert answer == "Nothing to change: give a title, body, base or state."

    async def test_a_thread_without_a_pull_request(self, context: ToolContext, tool: BaseTool) -> None:
        answer = await tool.ainvoke({"title": "New"})

        assert "has opened no pull request" in answer

    async def test_several_pull_requests_need_a_number(self, context: ToolContext, tool: BaseTool) -> None:
        first = await open_one(context, "drydock/abc-one")
        second = await open_one(context, "drydock/abc-two")

        answer = await tool.ainvoke({"title": "Which?"})

        assert f"(#{first}, #{second})" in answer


class TestReplay:
    async def test_a_replayed_update_does_not_undo_a_later_change_on_github(
        self, github: GithubWorld, context: ToolContext, tool: BaseTool
    ) -> None:
        number = await open_one(context)
        with bound_call("step-8.1"):
            await tool.ainvoke({"title": "Fix the widget"})
        pull(github, context, number).title = "Fix the widget (edited by a maintainer)"

        with bound_call("step-8.1"):
            again = await tool.ainvoke({"title": "Fix the widget"})

        assert pull(github, context, number).title == "Fix the widget (edited by a maintainer)"
        assert again["title"] == "Fix the widget"
