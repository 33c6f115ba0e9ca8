"""Repositories: the repository, a commit's authors, a person's permission."""

from __future__ import annotations

import pytest

from drydock.errors import OutboundFailed
from drydock.github import GithubClient
from tests.fakes.github import FakeGithub
from tests.fakes.github.history import Commit, history_of
from tests.fakes.github.state import Installation
from tests.github.conftest import REPO


class TestRepositories:
    async def test_a_commit_names_its_author_and_committer(
        self, github: FakeGithub, client: GithubClient, installation: Installation
    ) -> None:
        sha = "b" * 40
        history_of(github.state).add_commit(
            REPO, Commit(sha, "fix", "Ada", "ada@example.com", "Bot", "bot@example.com", author_login="ada")
        )
        body = await client.get_commit(await client.app_authorization(REPO), REPO, sha)
        assert body["commit"]["author"]["email"] == "ada@example.com"
        assert body["commit"]["committer"]["email"] == "bot@example.com"
        assert body["author"]["login"] == "ada"

    async def test_an_unknown_commit_is_githubs_422(self, client: GithubClient, installation: Installation) -> None:
        with pytest.raises(OutboundFailed, match="No commit found") as refused:
            await client.get_commit(await client.app_authorization(REPO), REPO, "c" * 40)
        assert refused.value.status == 422

    async def test_a_persons_permission(
        self, github: FakeGithub, client: GithubClient, installation: Installation
    ) -> None:
        history_of(github.state).set_permission(REPO, "ada", "maintain")
        authorization = await client.app_authorization(REPO)
        assert await client.collaborator_permission(authorization, REPO, "ada") == "maintain"
        assert await client.collaborator_permission(authorization, REPO, "stranger") == "none"

    async def test_the_repository(self, client: GithubClient, installation: Installation) -> None:
        body = await client.get_repository(await client.app_authorization(REPO), REPO)
        assert body["full_name"] == REPO
