"""Installations and tokens: the installation on a repository with its permissions, the App's
installations and an installation's repositories across pages, scoped tokens, and a client
without an App."""

from __future__ import annotations

import pytest

from drydock.errors import ChannelNotConfigured, OutboundFailed
from drydock.github import GithubClient
from tests.fakes.github import FakeGithub
from tests.fakes.github.state import App, Installation
from tests.github.conftest import PERMISSIONS, REPO, settings_for


class TestInstallation:
    async def test_the_installation_on_a_repository_carries_its_permissions_and_is_cached(
        self, github: FakeGithub, client: GithubClient, installation: Installation
    ) -> None:
        found = await client.installation(REPO)
        asked = len(github.requests)
        assert found.id == installation.id
        assert found.permissions == PERMISSIONS
        assert await client.installation(REPO.upper()) == found
        assert len(github.requests) == asked

    async def test_a_repository_without_the_app_is_a_404(
        self, client: GithubClient, installation: Installation
    ) -> None:
        with pytest.raises(OutboundFailed) as refused:
            await client.installation("acme/nowhere")
        assert refused.value.status == 404

    async def test_an_organization_without_the_app_is_none(
        self, client: GithubClient, installation: Installation
    ) -> None:
        assert await client.org_installation("acme") == installation.id
        assert await client.org_installation("elsewhere") is None


class TestTokens:
    async def test_a_minted_token_reaches_only_the_repositories_and_permissions_asked_for(
        self, github: FakeGithub, client: GithubClient, installation: Installation
    ) -> None:
        body = await client.mint_token(installation.id, repositories=["widgets"], permissions={"contents": "read"})
        token = str(body["token"])
        assert [repo["full_name"] for repo in body["repositories"]] == [REPO]
        assert github.token_allows(token, REPO, permission="contents", level="read")
        assert not github.token_allows(token, REPO, permission="contents", level="write")
        assert not github.token_allows(token, "acme/gadgets", permission="contents", level="read")

    async def test_app_authorization_is_the_installation_token(
        self, github: FakeGithub, client: GithubClient, installation: Installation
    ) -> None:
        authorization = await client.app_authorization(REPO)
        assert authorization.startswith("token ")
        assert github.token_allows(authorization.removeprefix("token "), REPO, permission="issues", level="write")


class TestListings:
    async def test_the_apps_installations(self, github: FakeGithub, client: GithubClient, app: App) -> None:
        first = github.install(app, "acme", ["widgets"])
        second = github.install(app, "globex", ["tools"])
        found = await client.app_installations()
        assert sorted(int(item["id"]) for item in found) == sorted([first.id, second.id])

    async def test_an_installations_repositories_are_read_across_pages(
        self, github: FakeGithub, client: GithubClient, app: App
    ) -> None:
        names = [f"repo-{index:03}" for index in range(230)]
        installation = github.install(app, "acme", names)
        found = await client.installation_repositories(installation.id)
        assert sorted(repo["full_name"] for repo in found) == [f"acme/{name}" for name in names]
        pages = [request for request in github.requests if request.path == "/installation/repositories"]
        assert len(pages) == 3

    async def test_a_listing_stops_at_its_limit(self, github: FakeGithub, client: GithubClient, app: App) -> None:
        installation = github.install(app, "acme", [f"repo-{index:03}" for index in range(230)])
        found = await client.installation_repositories(installation.id, limit=150)
        assert len(found) == 150
        assert len([request for request in github.requests if request.path == "/installation/repositories"]) == 2


class TestWithoutAnApp:
    async def test_acting_as_the_app_is_refused_and_a_callers_token_still_works(self, github: FakeGithub) -> None:
        client = GithubClient(settings_for(None, github.base_url), require_app=False)
        user = github.user_token("octocat")
        try:
            assert not client.configured
            with pytest.raises(ChannelNotConfigured):
                await client.app_installations()
            assert (await client.user(f"Bearer {user.token}"))["login"] == "octocat"
        finally:
            await client.aclose()

    def test_the_default_client_needs_the_app(self, github: FakeGithub) -> None:
        with pytest.raises(ChannelNotConfigured, match="DRYDOCK_GITHUB_APP_ID"):
            GithubClient(settings_for(None, github.base_url))
