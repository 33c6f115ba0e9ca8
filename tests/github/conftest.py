"""The fake GitHub over HTTP with one App installed on ``acme``, and a client configured as it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from drydock.config import GithubSettings
from drydock.github import GithubClient
from tests.fakes.github import FakeGithub
from tests.fakes.github.state import App, Installation

ORG = "acme"
REPO = f"{ORG}/widgets"
PERMISSIONS = {
    "issues": "write",
    "pull_requests": "write",
    "checks": "write",
    "contents": "write",
    "metadata": "read",
    "members": "read",
}


def settings_for(app: App | None, api_url: str) -> GithubSettings:
    values: dict[str, object] = {"api_url": api_url}
    if app is not None:
        values |= {"app_id": app.id, "private_key": app.private_key_pem}
    return GithubSettings.model_validate(values)


@pytest.fixture
def app(github: FakeGithub) -> App:
    return github.create_app("drydock")


@pytest.fixture
def installation(github: FakeGithub, app: App) -> Installation:
    return github.install(app, ORG, ["widgets", "gadgets"], permissions=PERMISSIONS)


@pytest.fixture
async def client(github: FakeGithub, app: App) -> AsyncIterator[GithubClient]:
    client = GithubClient(settings_for(app, github.base_url))
    yield client
    await client.aclose()
