"""Shared parts of the review tests: the fake GitHub with the Drydock App on ``acme/widgets``, a
client as the App, and pull request #5 with a diff."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from drydock.config import GithubSettings
from drydock.credentials.user_tokens import app_authorization
from drydock.github import GithubClient
from tests.fakes.github import FakeGithub, webhooks
from tests.fakes.github.activity import activity_of
from tests.fakes.github.reviews import PullFile, set_files
from tests.fakes.github.state import PullRequest

REPOSITORY = "acme/widgets"
NUMBER = 5
HEAD = "a" * 40
PERMISSIONS = {"contents": "write", "metadata": "read", "pull_requests": "write", "issues": "write"}
PATCH = "\n".join(
    [
        "@@ -1,2 +1,10 @@",
        " def add(a, b):",
        "     return a - b",
        "+",
        "+",
        "+def div(a, b):",
        "+    return a / b",
        "+",
        "+",
        "+def mean(values):",
        "+    return sum(values) / len(values)",
    ]
)


@dataclass
class GithubWorld:
    fake: FakeGithub
    client: GithubClient
    authorization: str

    def pull(self, number: int = NUMBER, *, head: str = HEAD, patch: str = PATCH) -> PullRequest:
        """Open (or move) pull request ``number`` with ``calc.py`` changed by ``patch``."""
        github = self.fake.state
        found = github.pulls.get((REPOSITORY, number))
        if found is None:
            found = github.pulls[(REPOSITORY, number)] = PullRequest(
                id=github.next_id(), repository=REPOSITORY, number=number, title="Division helpers", body="Adds div.",
                head_ref="feature", head_sha=head, base_ref="main", draft=False, user=webhooks.user("octocat"),
            )  # fmt: skip
            activity_of(github).open_issue(REPOSITORY, number, pull_request=True)
        found.head_sha = head
        set_files(github, REPOSITORY, number, [PullFile("calc.py", additions=8, patch=patch)])
        return found


@pytest.fixture
async def world() -> AsyncIterator[GithubWorld]:
    async with FakeGithub() as fake:
        app = fake.create_app("drydock")
        fake.install(app, "acme", ["widgets"], permissions=PERMISSIONS)
        settings = GithubSettings.model_validate(
            {"app_id": app.id, "private_key": app.private_key_pem, "api_url": fake.base_url}
        )
        client = GithubClient(settings)
        try:
            yield GithubWorld(fake, client, await app_authorization(client, REPOSITORY))
        finally:
            await client.aclose()
