"""``open_pull_request`` against the fake GitHub: the pull request GitHub gets, the durable record
that routes its events back to the thread, an already open pull request, and acting as the user."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from cryptography.fernet import Fernet
from fastapi import FastAPI
from redis.asyncio import Redis

from drydock.accounts import AccountsStore, UserProfile
from drydock.bus import Bus
from drydock.bus.envelopes import EventType
from drydock.channels.outbound import Outbound
from drydock.config import Settings
from drydock.credentials.cipher import SecretCipher
from drydock.credentials.user_tokens import UserTokens
from drydock.effects import EffectLedger, bound_call
from drydock.infra.redis import Keys
from drydock.threads.pr_records import PullRequestRecord, PullRequestState, PullRequestStore
from drydock.tools import open_pull_request
from tests.fakes.github.server import create_app
from tests.fakes.github.state import PullRequest
from tests.fakes.loopback import LoopbackServer
from tests.tools.channel_fixtures import GithubWorld, configured, github_world, last_event
from tests.tools.conftest import MakeContext

HOST = "github.com"
CRYPTO_KEY = Fernet.generate_key().decode()


@pytest.fixture(scope="module")
async def github() -> AsyncIterator[GithubWorld]:
    async with github_world() as world:
        yield world


@pytest.fixture
def tool_settings(settings: Settings, github: GithubWorld) -> Settings:
    return configured(github.settings(settings), crypto={"keys": [CRYPTO_KEY]})


@pytest.fixture
async def outbound(tool_settings: Settings) -> AsyncIterator[Outbound]:
    clients = Outbound.from_settings(tool_settings)
    yield clients
    await clients.aclose()


@pytest.fixture
def repo(github: GithubWorld) -> str:
    """A repository of this test alone, on the fake, whose default branch is ``trunk``."""
    name = f"acme/widgets-{uuid.uuid4().hex[:8]}"
    github.fake.state.repository(name).default_branch = "trunk"
    return name


def pulls(github: GithubWorld, repo: str) -> list[PullRequest]:
    return github.fake.state.pulls_of(repo)


class TestOpening:
    async def test_opens_into_the_default_branch_and_records_the_thread(
        self,
        github: GithubWorld,
        outbound: Outbound,
        tool_settings: Settings,
        make_context: MakeContext,
        redis: Redis,
        keys: Keys,
        bus: Bus,
        thread_id: str,
        repo: str,
    ) -> None:
        tool = open_pull_request.build(make_context(tool_settings, repository=repo, outbound=outbound))

        result = await tool.ainvoke({"title": "Fix the widget", "head": "drydock/abc-fix", "body": "Fixes #7."})

        [pull] = pulls(github, repo)
        assert (pull.title, pull.body, pull.head_ref, pull.base_ref, pull.draft) == (
            "Fix the widget",
            "Fixes #7.",
            "drydock/abc-fix",
            "trunk",
            False,
        )
        assert pull.user["login"] == "drydock[bot]"
        assert result == {
            "number": pull.number,
            "html_url": f"https://github.com/{repo}/pull/{pull.number}",
            "created": True,
            "draft": False,
            "head": "drydock/abc-fix",
            "base": "trunk",
        }
        records = PullRequestStore(redis, keys)
        record = await records.find(HOST, repo, pull.number)
        assert record is not None
        assert (record.thread_id, record.branch, record.state) == (thread_id, "drydock/abc-fix", PullRequestState.OPEN)
        assert await records.thread_for_branch(HOST, repo, "drydock/abc-fix") == thread_id
        event = await last_event(bus, thread_id, EventType.MESSAGE_POSTED)
        assert event is not None
        assert event.data == {"channel": "github", "target": f"{repo}#{pull.number}", "url": result["html_url"]}

    async def test_base_and_draft_can_be_given(
        self, github: GithubWorld, outbound: Outbound, tool_settings: Settings, make_context: MakeContext, repo: str
    ) -> None:
        tool = open_pull_request.build(make_context(tool_settings, repository=repo, outbound=outbound))

        result = await tool.ainvoke({"title": "Try", "head": "drydock/abc-try", "base": "release", "draft": True})

        [pull] = pulls(github, repo)
        assert (pull.base_ref, pull.draft) == ("release", True)
        assert (result["base"], result["draft"]) == ("release", True)

    async def test_draft_defaults_to_the_user_s_preference(
        self,
        github: GithubWorld,
        outbound: Outbound,
        tool_settings: Settings,
        make_context: MakeContext,
        redis: Redis,
        keys: Keys,
        repo: str,
    ) -> None:
        await AccountsStore(redis, keys, host=HOST).save_profile(UserProfile(user_id="user-1", draft_prs=True))
        tool = open_pull_request.build(
            make_context(tool_settings, repository=repo, user_id="user-1", outbound=outbound)
        )

        await tool.ainvoke({"title": "Draft it", "head": "drydock/abc-draft"})

        assert [pull.draft for pull in pulls(github, repo)] == [True]


class TestAlreadyOpen:
    async def test_a_second_call_for_the_branch_returns_the_same_pull_request(
        self, github: GithubWorld, outbound: Outbound, tool_settings: Settings, make_context: MakeContext, repo: str
    ) -> None:
        tool = open_pull_request.build(make_context(tool_settings, repository=repo, outbound=outbound))
        first = await tool.ainvoke({"title": "Fix", "head": "drydock/abc-fix"})

        second = await tool.ainvoke({"title": "Fix again", "head": "drydock/abc-fix"})

        assert second["number"] == first["number"]
        assert second["created"] is False
        assert len(pulls(github, repo)) == 1

    async def test_a_pull_request_someone_opened_for_the_branch_is_adopted(
        self,
        github: GithubWorld,
        outbound: Outbound,
        tool_settings: Settings,
        make_context: MakeContext,
        redis: Redis,
        keys: Keys,
        thread_id: str,
        repo: str,
    ) -> None:
        person = github.fake.user_token("octocat", [repo])
        tool = open_pull_request.build(make_context(tool_settings, repository=repo, outbound=outbound))
        assert outbound.github is not None
        opened = await outbound.github.create_pull(
            f"token {person.token}", repo, title="Mine", head="drydock/abc-fix", base="trunk"
        )

        result = await tool.ainvoke({"title": "Fix", "head": "drydock/abc-fix"})

        assert (result["number"], result["created"]) == (opened["number"], False)
        record = await PullRequestStore(redis, keys).find(HOST, repo, opened["number"])
        assert record is not None
        assert record.thread_id == thread_id

    async def test_a_pull_request_of_another_thread_is_refused(
        self,
        github: GithubWorld,
        outbound: Outbound,
        tool_settings: Settings,
        make_context: MakeContext,
        redis: Redis,
        keys: Keys,
        repo: str,
    ) -> None:
        tool = open_pull_request.build(make_context(tool_settings, repository=repo, outbound=outbound))
        first = await tool.ainvoke({"title": "Fix", "head": "drydock/abc-fix"})
        other_thread = str(uuid.uuid4())
        records = PullRequestStore(redis, keys)
        await records.record(PullRequestRecord(HOST, repo, first["number"], other_thread, "drydock/abc-fix"))

        answer = await tool.ainvoke({"title": "Fix", "head": "drydock/abc-fix"})

        assert "opened by another Drydock thread" in answer
        record = await records.find(HOST, repo, first["number"])
        assert record is not None
        assert record.thread_id == other_thread


class TestReplay:
    """A replayed call leaves one pull request and answers as the first attempt did."""

    async def test_a_crash_after_the_ledger_record_answers_with_the_recorded_result(
        self, github: GithubWorld, outbound: Outbound, tool_settings: Settings, make_context: MakeContext, repo: str
    ) -> None:
        tool = open_pull_request.build(make_context(tool_settings, repository=repo, outbound=outbound))

        with bound_call("step-8.0"):
            first = await tool.ainvoke({"title": "Fix", "head": "drydock/abc-fix"})
        with bound_call("step-8.0"):
            again = await tool.ainvoke({"title": "Fix", "head": "drydock/abc-fix"})

        assert again == first
        assert first["created"] is True
        assert len(pulls(github, repo)) == 1

    async def test_a_crash_between_opening_and_the_record_finds_it_by_its_branch(
        self,
        github: GithubWorld,
        outbound: Outbound,
        tool_settings: Settings,
        make_context: MakeContext,
        repo: str,
        redis: Redis,
        keys: Keys,
        thread_id: str,
    ) -> None:
        tool = open_pull_request.build(make_context(tool_settings, repository=repo, outbound=outbound))
        with bound_call("step-6.0"):
            first = await tool.ainvoke({"title": "Fix", "head": "drydock/abc-fix"})
        await EffectLedger(redis, keys).claim(thread_id, "call_open:pull_request")

        with bound_call("step-8.0"):
            again = await tool.ainvoke({"title": "Fix", "head": "drydock/abc-fix"})

        assert again["number"] == first["number"]
        assert len(pulls(github, repo)) == 1


class TestActingAsTheUser:
    async def test_a_user_with_a_stored_token_opens_it_as_themselves(
        self,
        github: GithubWorld,
        outbound: Outbound,
        tool_settings: Settings,
        make_context: MakeContext,
        redis: Redis,
        keys: Keys,
        repo: str,
    ) -> None:
        token = github.fake.user_token("ada", [repo])
        await UserTokens(redis, keys, SecretCipher([CRYPTO_KEY])).put("user-1", token.token)
        tool = open_pull_request.build(
            make_context(tool_settings, repository=repo, user_id="user-1", outbound=outbound)
        )

        await tool.ainvoke({"title": "Mine", "head": "drydock/abc-mine"})

        assert [pull.user["login"] for pull in pulls(github, repo)] == ["ada"]
        creates = [r for r in github.fake.requests if r.method == "POST" and r.path == f"/repos/{repo}/pulls"]
        assert creates[-1].authorization == f"token {token.token}"

    async def test_a_token_github_rejects_falls_back_to_the_app(
        self,
        github: GithubWorld,
        outbound: Outbound,
        tool_settings: Settings,
        make_context: MakeContext,
        redis: Redis,
        keys: Keys,
        repo: str,
    ) -> None:
        await UserTokens(redis, keys, SecretCipher([CRYPTO_KEY])).put("user-1", "ghu_revoked")
        tool = open_pull_request.build(
            make_context(tool_settings, repository=repo, user_id="user-1", outbound=outbound)
        )

        result = await tool.ainvoke({"title": "Anyway", "head": "drydock/abc-anyway"})

        assert result["created"] is True
        assert [pull.user["login"] for pull in pulls(github, repo)] == ["drydock[bot]"]


class TestRefusals:
    async def test_github_s_validation_message_reaches_the_model(
        self, github: GithubWorld, outbound: Outbound, tool_settings: Settings, make_context: MakeContext, repo: str
    ) -> None:
        tool = open_pull_request.build(make_context(tool_settings, repository=repo, outbound=outbound))

        answer = await tool.ainvoke({"title": "Nothing", "head": "trunk"})

        assert "No commits between trunk and trunk" in answer
        assert pulls(github, repo) == []

    async def test_a_head_of_another_owner_is_refused(
        self, github: GithubWorld, outbound: Outbound, tool_settings: Settings, make_context: MakeContext, repo: str
    ) -> None:
        tool = open_pull_request.build(make_context(tool_settings, repository=repo, outbound=outbound))

        answer = await tool.ainvoke({"title": "Fork", "head": "someone:feature"})

        assert "without an `owner:` prefix" in answer
        assert pulls(github, repo) == []


class TestEnterprise:
    async def test_an_api_url_with_a_path_prefix(
        self, github: GithubWorld, settings: Settings, make_context: MakeContext, repo: str
    ) -> None:
        enterprise = FastAPI()
        enterprise.mount("/api/v3", create_app(github.fake.state))
        async with LoopbackServer(enterprise) as server:
            enterprise_settings = configured(github.settings(settings), github={"api_url": f"{server.base_url}/api/v3"})
            outbound = Outbound.from_settings(enterprise_settings)
            try:
                tool = open_pull_request.build(make_context(enterprise_settings, repository=repo, outbound=outbound))
                first = await tool.ainvoke({"title": "On GHES", "head": "drydock/abc-ghes"})
                again = await tool.ainvoke({"title": "On GHES", "head": "drydock/abc-ghes"})
            finally:
                await outbound.aclose()

        assert (first["created"], again["created"], again["number"]) == (True, False, first["number"])
        assert [pull.base_ref for pull in pulls(github, repo)] == ["trunk"]
