"""The GitHub client against the fake GitHub over HTTP: App authentication and the token
cache, comments, reactions, check runs, membership, errors, GraphQL, a GitHub Enterprise base
URL, and the one connection pool."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI, Request, Response

from drydock.bus.envelopes import Author, Channel, InboxMessage, ReplyAddress
from drydock.channels.errors import ChannelNotConfigured, OutboundFailed
from drydock.channels.github.reply import GithubReplies
from drydock.channels.github.status import CHECK_NAME, GithubStatus
from drydock.channels.run_status import RunStatus
from drydock.config import GithubSettings
from drydock.github import GithubClient
from tests.fakes.github import FakeGithub
from tests.fakes.github.activity import activity_of
from tests.fakes.github.server import create_app
from tests.fakes.github.state import App, Installation
from tests.fakes.loopback import LoopbackServer

REPO = "acme/widgets"
PERMISSIONS = {"issues": "write", "pull_requests": "write", "checks": "write", "metadata": "read", "members": "read"}


@pytest.fixture
def app(github: FakeGithub) -> App:
    return github.create_app("drydock")


@pytest.fixture
def installation(github: FakeGithub, app: App) -> Installation:
    return github.install(app, "acme", ["widgets"], permissions=PERMISSIONS)


def settings_for(app: App, api_url: str, **extra: object) -> GithubSettings:
    return GithubSettings.model_validate(
        {"app_id": app.id, "private_key": app.private_key_pem, "api_url": api_url, **extra}
    )


@pytest.fixture
async def client(github: FakeGithub, app: App) -> AsyncIterator[GithubClient]:
    client = GithubClient(settings_for(app, github.base_url))
    yield client
    await client.aclose()


class TestAuthentication:
    async def test_installation_tokens_are_cached_until_shortly_before_expiry(
        self, github: FakeGithub, client: GithubClient, installation: Installation
    ) -> None:
        first = await client.installation_token(installation.id)
        assert await client.installation_token(installation.id) == first
        assert len(github.state.tokens) == 1

    async def test_a_token_within_the_refresh_margin_is_replaced(
        self, github: FakeGithub, app: App, installation: Installation
    ) -> None:
        client = GithubClient(settings_for(app, github.base_url, token_refresh_margin=timedelta(minutes=61)))
        try:
            first = await client.installation_token(installation.id)
            second = await client.installation_token(installation.id)
        finally:
            await client.aclose()
        assert first != second
        assert len(github.state.tokens) == 2

    async def test_a_revoked_token_is_replaced_after_a_401(
        self, github: FakeGithub, client: GithubClient, installation: Installation
    ) -> None:
        activity_of(github.state).open_issue(REPO, 1)
        stale = await client.installation_token(installation.id)
        del github.state.tokens[stale]
        await client.create_comment(installation.id, REPO, 1, "still works")
        assert await client.installation_token(installation.id) != stale

    async def test_concurrent_callers_for_one_installation_mint_once(
        self, github: FakeGithub, client: GithubClient, installation: Installation
    ) -> None:
        tokens = await asyncio.gather(*(client.installation_token(installation.id) for _ in range(5)))
        assert len(set(tokens)) == 1
        assert len(github.state.tokens) == 1

    async def test_the_installation_is_found_from_the_repository(
        self, github: FakeGithub, client: GithubClient, installation: Installation
    ) -> None:
        activity_of(github.state).open_issue(REPO, 2)
        await client.create_comment(None, REPO, 2, "found my way")
        assert await client.installation_for(REPO) == installation.id

    async def test_a_callers_authorization_is_sent_as_given(
        self, github: FakeGithub, client: GithubClient, installation: Installation
    ) -> None:
        authorization = f"Bearer {await client.installation_token(installation.id)}"
        assert (await client.get_repository(authorization, REPO))["full_name"] == REPO
        assert github.requests[-1].authorization == authorization

    async def test_a_client_without_app_credentials_is_refused(self) -> None:
        with pytest.raises(ChannelNotConfigured):
            GithubClient(GithubSettings())

    async def test_an_unreachable_github_is_an_outbound_failure(self, app: App) -> None:
        client = GithubClient(settings_for(app, "http://127.0.0.1:9"))
        try:
            with pytest.raises(OutboundFailed, match="unreachable"):
                await client.installation_token(1)
        finally:
            await client.aclose()


class TestConversation:
    async def test_comments_reactions_and_review_replies(
        self, github: FakeGithub, client: GithubClient, installation: Installation
    ) -> None:
        activity = activity_of(github.state)
        activity.open_issue(REPO, 3)
        comment_id = await client.create_comment(installation.id, REPO, 3, "On it.")
        (posted,) = activity.comments_on(REPO, 3)
        assert (posted.id, posted.body, posted.login) == (comment_id, "On it.", "drydock[bot]")

        human = activity.add_comment(REPO, 3, "thanks", login="octocat")
        await client.react(installation.id, REPO, "issue_comment", human.id)
        await client.react(installation.id, REPO, "issue_comment", human.id)
        assert [r.content for r in activity.reactions_to(f"issue_comment:{human.id}")] == ["eyes"]

        review = activity.add_comment(REPO, 4, "nit", login="octocat", kind="review_comment")
        reply_id = await client.reply_to_review_comment(installation.id, REPO, 4, review.id, "fixed")
        assert activity.comments[reply_id].in_reply_to == review.id

    async def test_errors_carry_githubs_status_and_message(
        self, github: FakeGithub, client: GithubClient, installation: Installation
    ) -> None:
        with pytest.raises(OutboundFailed) as missing:
            await client.create_comment(installation.id, REPO, 999, "nobody home")
        assert missing.value.status == 404
        with pytest.raises(ValueError, match="not a GitHub reaction"):
            await client.react(installation.id, REPO, "issue", 1, "thumbsup")

    async def test_a_missing_permission_is_403(self, github: FakeGithub, app: App) -> None:
        installation = github.install(app, "acme", ["widgets"], permissions={"metadata": "read", "issues": "read"})
        activity_of(github.state).open_issue(REPO, 5)
        client = GithubClient(settings_for(app, github.base_url))
        try:
            with pytest.raises(OutboundFailed) as refused:
                await client.create_comment(installation.id, REPO, 5, "x")
        finally:
            await client.aclose()
        assert refused.value.status == 403
        assert "Resource not accessible by integration" in refused.value.reason


class TestChecksAndMembership:
    async def test_a_check_run_is_created_and_completed(
        self, github: FakeGithub, client: GithubClient, installation: Installation
    ) -> None:
        run_id = await client.create_check_run(
            installation.id, REPO, name="Drydock", head_sha="a" * 40, status="in_progress", title="Working"
        )
        await client.update_check_run(installation.id, REPO, run_id, status="completed", conclusion="success")
        run = activity_of(github.state).check_runs[run_id]
        assert (run.status, run.conclusion) == ("completed", "success")
        with pytest.raises(OutboundFailed) as invalid:
            await client.update_check_run(installation.id, REPO, run_id, status="completed")
        assert invalid.value.status == 422

    async def test_organization_membership(
        self, github: FakeGithub, client: GithubClient, app: App, installation: Installation
    ) -> None:
        activity_of(github.state).add_member("acme", "alice")
        org_installation = await client.org_installation("acme")
        assert org_installation == installation.id
        assert await client.is_org_member(installation.id, "acme", "alice") is True
        assert await client.is_org_member(installation.id, "acme", "bob") is False
        assert await client.is_org_member(installation.id, "elsewhere", "alice") is False
        assert await client.org_installation("nobody") is None


class TestEnterprise:
    async def test_a_base_url_with_a_path_prefix(
        self, github: FakeGithub, app: App, installation: Installation
    ) -> None:
        enterprise = FastAPI()
        enterprise.mount("/api/v3", create_app(github.state))
        activity_of(github.state).open_issue(REPO, 6)
        async with LoopbackServer(enterprise) as server:
            client = GithubClient(settings_for(app, f"{server.base_url}/api/v3"))
            try:
                await client.create_comment(None, REPO, 6, "hello from GHES")
            finally:
                await client.aclose()
        assert activity_of(github.state).comments_on(REPO, 6)[0].body == "hello from GHES"

    async def test_graphql_goes_to_api_graphql_beside_api_v3(
        self, github: FakeGithub, app: App, installation: Installation
    ) -> None:
        enterprise = FastAPI()
        enterprise.mount("/api/v3", create_app(github.state))
        enterprise.mount("/api", create_app(github.state))
        async with LoopbackServer(enterprise) as server:
            client = GithubClient(settings_for(app, f"{server.base_url}/api/v3"))
            try:
                authorization = f"token {await client.installation_token(installation.id)}"
                assert client.graphql_url == f"{server.base_url}/api/graphql"
                with pytest.raises(OutboundFailed) as missing:
                    await client.resolve_review_thread(authorization, "PRRT_nothing")
            finally:
                await client.aclose()
        assert missing.value.status == 404
        assert (github.requests[-1].method, github.requests[-1].path) == ("POST", "/api/graphql")


class TestGraphql:
    async def test_a_refusal_in_errors_carries_its_status_and_message(
        self, client: GithubClient, installation: Installation
    ) -> None:
        authorization = f"token {await client.installation_token(installation.id)}"
        with pytest.raises(OutboundFailed) as missing:
            await client.resolve_review_thread(authorization, "PRRT_nothing")
        assert missing.value.status == 404
        assert "Could not resolve to a node with the global id of 'PRRT_nothing'" in missing.value.reason

    async def test_an_http_failure_is_an_outbound_failure(self, client: GithubClient) -> None:
        with pytest.raises(OutboundFailed) as refused:
            await client.review_threads("token not-a-token", REPO, 1)
        assert refused.value.status == 401


class TestTransport:
    async def test_requests_share_one_connection(
        self, github: FakeGithub, app: App, installation: Installation
    ) -> None:
        peers: list[int] = []
        recording = FastAPI()

        @recording.middleware("http")
        async def record(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
            assert request.client is not None
            peers.append(request.client.port)
            return await call_next(request)

        recording.mount("/", create_app(github.state))
        activity_of(github.state).open_issue(REPO, 11)
        async with LoopbackServer(recording) as server:
            client = GithubClient(settings_for(app, server.base_url))
            try:
                for text in ("one", "two", "three"):
                    await client.create_comment(installation.id, REPO, 11, text)
            finally:
                await client.aclose()
        assert len(peers) == 4
        assert len(set(peers)) == 1

    async def test_a_given_transport_carries_the_requests(
        self, github: FakeGithub, app: App, installation: Installation
    ) -> None:
        activity_of(github.state).open_issue(REPO, 12)
        transport = httpx.ASGITransport(app=create_app(github.state))
        client = GithubClient(settings_for(app, "http://github.invalid"), transport=transport)
        try:
            await client.create_comment(installation.id, REPO, 12, "in process")
        finally:
            await client.aclose()
        assert activity_of(github.state).comments_on(REPO, 12)[0].body == "in process"


def message_for(address: dict[str, str], references: dict[str, str]) -> InboxMessage:
    return InboxMessage(
        delivery_id="d-1",
        thread_id="00000000-0000-0000-0000-000000000001",
        channel=Channel.GITHUB,
        author=Author(channel=Channel.GITHUB, external_id="1", name="octocat"),
        text="@drydock",
        references=references,
        reply_to=ReplyAddress(channel=Channel.GITHUB, address=address),
    )


class TestRepliesAndStatus:
    async def test_replies_go_to_the_issue_or_the_review_thread(
        self, github: FakeGithub, client: GithubClient, installation: Installation
    ) -> None:
        activity = activity_of(github.state)
        activity.open_issue(REPO, 7)
        replies = GithubReplies(client)
        base = {"host": "github.com", "repository": REPO, "installation_id": str(installation.id)}
        await replies.reply(ReplyAddress(channel=Channel.GITHUB, address={**base, "number": "7"}), "done")
        review = activity.add_comment(REPO, 8, "why?", login="octocat", kind="review_comment")
        address = {**base, "number": "8", "review_comment_id": str(review.id)}
        await replies.reply(ReplyAddress(channel=Channel.GITHUB, address=address), "because")
        assert [c.body for c in activity.comments_on(REPO, 7)] == ["done"]
        assert activity.comments_on(REPO, 8)[-1].in_reply_to == review.id

    async def test_acknowledge_reacts_to_what_triggered(
        self, github: FakeGithub, client: GithubClient, installation: Installation
    ) -> None:
        activity = activity_of(github.state)
        human = activity.add_comment(REPO, 9, "@drydock", login="octocat")
        base = {"host": "github.com", "repository": REPO, "number": "9", "installation_id": str(installation.id)}
        replies = GithubReplies(client)
        assert await replies.acknowledge(
            message_for(base, {"comment_kind": "issue_comment", "comment_id": str(human.id)})
        )
        assert activity.reactions_to(f"issue_comment:{human.id}")[0].content == "eyes"
        assert not await replies.acknowledge(message_for(base, {"comment_kind": "review", "review_id": "5"}))

    async def test_status_is_a_check_run_on_the_head_commit(
        self, github: FakeGithub, client: GithubClient, installation: Installation
    ) -> None:
        status = GithubStatus(client)
        base = {"host": "github.com", "repository": REPO, "number": "10", "installation_id": str(installation.id)}
        issue = ReplyAddress(channel=Channel.GITHUB, address=base)
        assert await status.show(issue, RunStatus.WORKING) == {}
        pull = ReplyAddress(channel=Channel.GITHUB, address={**base, "head_sha": "b" * 40})
        kept = await status.show(pull, RunStatus.WORKING, "Reading the code")
        run = activity_of(github.state).check_runs[int(kept["check_run_id"])]
        assert (run.name, run.status, run.output["summary"]) == (CHECK_NAME, "in_progress", "Reading the code")
        updated = ReplyAddress(channel=Channel.GITHUB, address={**pull.address, **kept})
        assert await status.show(updated, RunStatus.STEP_LIMIT) == {}
        assert (run.status, run.conclusion) == ("completed", "neutral")

    async def test_a_stopped_run_cancels_its_check_run(
        self, github: FakeGithub, client: GithubClient, installation: Installation
    ) -> None:
        status = GithubStatus(client)
        address = {
            "host": "github.com",
            "repository": REPO,
            "number": "11",
            "installation_id": str(installation.id),
            "head_sha": "c" * 40,
        }
        pull = ReplyAddress(channel=Channel.GITHUB, address=address)
        kept = await status.show(pull, RunStatus.WORKING)
        run = activity_of(github.state).check_runs[int(kept["check_run_id"])]
        updated = ReplyAddress(channel=Channel.GITHUB, address={**address, **kept})
        await status.show(updated, RunStatus.STOPPED, "Stopped by ada.")
        assert (run.status, run.conclusion, run.output["summary"]) == ("completed", "cancelled", "Stopped by ada.")
