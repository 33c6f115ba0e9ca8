"""``request_review``: the request reaches the reviewer thread as a webhook would (metadata, then
inbox, then wake), once per head revision, and only for the thread's own open pull requests on
repositories with review enabled."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain_core.tools import BaseTool
from redis.asyncio import Redis

from drydock.accounts import AccountsStore, RepositorySettings
from drydock.bus import Bus
from drydock.bus.envelopes import Channel, Trigger
from drydock.channels.outbound import Outbound
from drydock.config import Settings
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.threads import ids
from drydock.threads.fields import CREATED_BY
from drydock.threads.metadata import ThreadMetadataStore
from drydock.tools import open_pull_request, request_review, update_pull_request
from drydock.tools.context import ToolContext
from tests.fakes.github.pulls import branch_sha
from tests.tools.channel_fixtures import GithubWorld, github_world, inbox, wakes
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
def repo(github: GithubWorld) -> str:
    name = f"acme/widgets-{uuid.uuid4().hex[:8]}"
    github.fake.state.repository(name)
    return name


@pytest.fixture
async def accounts(redis: Redis, keys: Keys) -> AccountsStore:
    return AccountsStore(redis, keys, host=HOST)


@pytest.fixture
async def context(
    github: GithubWorld, outbound: Outbound, settings: Settings, make_context: MakeContext, repo: str
) -> ToolContext:
    return make_context(github.settings(settings), repository=repo, user_id="user-1", outbound=outbound)


@pytest.fixture
def tool(context: ToolContext) -> BaseTool:
    return request_review.build(context)


async def open_one(context: ToolContext, head: str = "drydock/abc-fix") -> int:
    result: dict[str, Any] = await open_pull_request.build(context).ainvoke({"title": "Fix the widget", "head": head})
    return int(result["number"])


class TestRequest:
    async def test_the_reviewer_thread_gets_metadata_a_message_and_a_wake(
        self,
        accounts: AccountsStore,
        context: ToolContext,
        tool: BaseTool,
        bus: Bus,
        redis: Redis,
        keys: Keys,
        repo: str,
        thread_id: str,
    ) -> None:
        await accounts.save_repository(RepositorySettings(full_name=repo, reviewer=True))
        number = await open_one(context)
        owner, _, name = repo.partition("/")
        reviewer = ids.reviewer(HOST, owner, name, number)

        result = await tool.ainvoke({"note": "Check the error handling."})

        head_sha = branch_sha(repo, "drydock/abc-fix")
        assert result == {
            "number": number,
            "head_sha": head_sha,
            "reviewer_thread": reviewer,
            "already_requested": False,
        }
        created = await ThreadMetadataStore(redis, keys).get(reviewer)
        assert (created.kind, created.repository, created.created_by) == (Role.REVIEWER, repo, "coder")
        reply_to = created.require_reply_to()
        assert reply_to.channel is Channel.GITHUB
        assert reply_to.address == {
            "host": HOST,
            "repository": repo,
            "number": str(number),
            "kind": "pull_request",
            "head_sha": head_sha,
        }
        [message] = await inbox(bus, reviewer)
        assert message.trigger is Trigger.REVIEW_REQUEST
        assert (
            message.text
            == f"Pull request #{number} review requested by the coder: Fix the widget\n\nCheck the error handling."
        )
        assert (message.references["head_sha"], message.references["requested_by"]) == (head_sha, thread_id)
        assert message.author.user_id == "user-1"
        [wake] = await wakes(bus, Role.REVIEWER, reviewer)
        assert (wake.thread_id, wake.role, wake.reason) == (reviewer, Role.REVIEWER, "review_request")

    async def test_asking_again_for_the_same_revision_is_stored_once(
        self, accounts: AccountsStore, context: ToolContext, tool: BaseTool, bus: Bus, repo: str
    ) -> None:
        await accounts.save_repository(RepositorySettings(full_name=repo, reviewer=True))
        await open_one(context)
        first = await tool.ainvoke({})

        again = await tool.ainvoke({})

        assert again["already_requested"] is True
        assert len(await inbox(bus, first["reviewer_thread"])) == 1
        assert len(await wakes(bus, Role.REVIEWER, first["reviewer_thread"])) == 1

    async def test_an_existing_reviewer_thread_keeps_its_metadata(
        self,
        accounts: AccountsStore,
        context: ToolContext,
        tool: BaseTool,
        bus: Bus,
        redis: Redis,
        keys: Keys,
        repo: str,
    ) -> None:
        await accounts.save_repository(RepositorySettings(full_name=repo, reviewer=True))
        number = await open_one(context)
        owner, _, name = repo.partition("/")
        reviewer = ids.reviewer(HOST, owner, name, number)
        metadata = ThreadMetadataStore(redis, keys)
        await metadata.create(reviewer, kind=Role.REVIEWER, fields={CREATED_BY: "ingress"})

        await tool.ainvoke({"number": number})

        assert (await metadata.get(reviewer)).created_by == "ingress"
        assert len(await inbox(bus, reviewer)) == 1


class TestRefusals:
    async def test_a_repository_without_review_enabled(
        self, accounts: AccountsStore, context: ToolContext, tool: BaseTool, bus: Bus, repo: str
    ) -> None:
        await accounts.save_repository(RepositorySettings(full_name=repo, reviewer=False))
        number = await open_one(context)
        owner, _, name = repo.partition("/")

        answer = await tool.ainvoke({})

        assert answer == f"Drydock's reviewer is not enabled on {repo}; an admin can enable it in the dashboard."
        assert await inbox(bus, ids.reviewer(HOST, owner, name, number)) == []

    async def test_a_pull_request_of_another_thread(
        self, accounts: AccountsStore, context: ToolContext, tool: BaseTool, repo: str
    ) -> None:
        await accounts.save_repository(RepositorySettings(full_name=repo, reviewer=True))

        answer = await tool.ainvoke({"number": 5})

        assert answer == (
            f"Pull request #5 of {repo} was not opened by this thread; "
            "this tool acts only on the thread's own pull requests."
        )

    async def test_a_closed_pull_request(
        self, accounts: AccountsStore, context: ToolContext, tool: BaseTool, bus: Bus, repo: str
    ) -> None:
        await accounts.save_repository(RepositorySettings(full_name=repo, reviewer=True))
        number = await open_one(context)
        await update_pull_request.build(context).ainvoke({"state": "closed"})

        answer = await tool.ainvoke({})

        assert answer == f"Pull request #{number} of {repo} is closed; nothing to review."
