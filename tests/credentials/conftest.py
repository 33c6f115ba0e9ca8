"""Fixtures for the credential tests: the fake GitHub with the Drydock App installed on
``acme/widgets``, an upstream git server that accepts only live installation tokens, and the
credential proxy serving on free loopback ports against the session's NATS and Valkey."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from nats.aio.client import Client as NatsClient
from redis.asyncio import Redis

from drydock.bus import Bus
from drydock.config import Settings, load_settings
from drydock.credentials import ProxyCredentials
from drydock.embedded import EmbeddedUrls
from drydock.infra.redis import Keys
from drydock.runtime import Runtime
from services.credential_proxy.server import Listening, serving
from tests.fakes.git_server import GitServer
from tests.fakes.github import App, FakeGithub

REPOSITORY = "acme/widgets"
OTHER_REPOSITORY = "acme/gadgets"


@pytest.fixture(scope="session")
async def github() -> AsyncIterator[FakeGithub]:
    async with FakeGithub() as fake:
        yield fake


@pytest.fixture(scope="session")
def github_app(github: FakeGithub) -> App:
    app = github.create_app()
    github.install(app, "acme", ["widgets", "gadgets"])
    return app


@pytest.fixture(scope="session")
async def git_upstream(github: FakeGithub, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[GitServer]:
    async with GitServer(tmp_path_factory.mktemp("upstream"), authorize=github.git_access) as server:
        await server.create_repository(REPOSITORY, {"README.md": b"# widgets\n", "src/app.py": b"print('hi')\n"})
        await server.create_repository(OTHER_REPOSITORY, {"README.md": b"# gadgets\n"})
        yield server


def proxy_settings(
    infra: EmbeddedUrls,
    github: FakeGithub,
    app: App,
    git_upstream: GitServer,
    crypto_keys: list[str],
    socket_dir: Path,
) -> Settings:
    return load_settings(
        nats={"url": infra.nats},
        redis={"url": infra.redis},
        github={"api_url": github.base_url, "app_id": app.id, "private_key": app.private_key_pem},
        crypto={"keys": crypto_keys},
        proxy={"port": 0, "egress_port": 0, "git_upstream": git_upstream.base_url, "socket_dir": str(socket_dir)},
    )


@pytest.fixture
def credential_settings(
    infra: EmbeddedUrls,
    github: FakeGithub,
    github_app: App,
    git_upstream: GitServer,
    crypto_key: str,
    tmp_path: Path,
) -> Settings:
    return proxy_settings(infra, github, github_app, git_upstream, [crypto_key], tmp_path / "proxy")


@pytest.fixture
async def proxy(
    credential_settings: Settings, nats_client: NatsClient, bus: Bus, redis: Redis, keys: Keys
) -> AsyncIterator[Listening]:
    """The proxy on free ports; ``settings.proxy.url``/``egress_url`` are then set to them."""
    async with serving(Runtime(credential_settings, nats_client, bus, redis, keys)) as listening:
        yield listening


@pytest.fixture
def settings_for_sandboxes(credential_settings: Settings, proxy: Listening) -> Settings:
    """The settings a worker would have: the proxy's URLs as sandboxes reach them."""
    section = credential_settings.proxy.model_copy(update={"url": proxy.url, "egress_url": proxy.egress_url})
    return credential_settings.model_copy(update={"proxy": section})


@pytest.fixture
async def credentials(settings_for_sandboxes: Settings, redis: Redis, keys: Keys) -> AsyncIterator[ProxyCredentials]:
    broker = ProxyCredentials.create(settings_for_sandboxes, redis, keys)
    yield broker
    await broker.aclose()


@pytest.fixture
def sandbox_home(tmp_path: Path) -> Path:
    """The sandbox side: HOME of the git processes that act as the sandbox."""
    home = tmp_path / "sandbox-home"
    home.mkdir()
    return home
