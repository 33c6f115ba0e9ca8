"""Shared fixtures: one embedded NATS and one embedded Valkey per test session, real servers."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import hypothesis
import pytest
from cryptography.fernet import Fernet
from nats.aio.client import Client as NatsClient
from redis.asyncio import Redis

from drydock.bus import Bus, connect_nats, provision, topology
from drydock.config import Settings, load_settings
from drydock.embedded import EmbeddedServer, EmbeddedUrls, embedded_infrastructure, valkey_server
from drydock.infra.redis import Keys, connect_redis
from drydock.infra.server_keys import ServerKeys
from tests.fakes.github import FakeGithub

# Under CI property tests replay the same examples every run, so a red gate is reproducible;
# on a developer's machine they keep exploring new ones.
hypothesis.settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    hypothesis.settings.load_profile("ci")


@pytest.fixture(scope="session")
async def infra() -> AsyncIterator[EmbeddedUrls]:
    async with embedded_infrastructure() as urls:
        yield urls


@pytest.fixture(scope="session")
def crypto_key() -> str:
    """The session's ``DRYDOCK_CRYPTO_KEYS`` key: :func:`settings` and :func:`server_keys` use it."""
    return Fernet.generate_key().decode()


@pytest.fixture(scope="session")
def settings(infra: EmbeddedUrls, crypto_key: str) -> Settings:
    return load_settings(nats={"url": infra.nats}, redis={"url": infra.redis}, crypto={"keys": [crypto_key]})


@pytest.fixture(scope="session")
def server_keys(crypto_key: str) -> ServerKeys:
    """The MAC keys of :func:`settings`, for stores a test builds itself."""
    return ServerKeys([crypto_key])


@pytest.fixture(scope="session")
async def nats_client(settings: Settings) -> AsyncIterator[NatsClient]:
    nc = await connect_nats(settings.nats, name="tests")
    yield nc
    await nc.close()


@pytest.fixture(scope="session")
async def bus(nats_client: NatsClient, settings: Settings) -> Bus:
    bus = Bus(nats_client)
    await provision(bus.js, topology(settings.nats))
    return bus


@pytest.fixture(scope="session")
async def redis(settings: Settings) -> AsyncIterator[Redis]:
    client = await connect_redis(settings.redis)
    yield client
    await client.aclose()


@pytest.fixture
async def own_valkey() -> AsyncIterator[EmbeddedServer]:
    """A Valkey of the test's own (AOF persistence), for tests that stop and restart it
    (``await own_valkey.stop()``, ``await own_valkey.start()``: same port, same user, same data)."""
    with tempfile.TemporaryDirectory(prefix="drydock-valkey-") as tmp:
        server = valkey_server(Path(tmp), persist=True)
        await server.start()
        try:
            yield server
        finally:
            await server.stop()


@pytest.fixture
async def github() -> AsyncIterator[FakeGithub]:
    """A fake GitHub of the test's own on loopback (override it where a wider scope is wanted)."""
    async with FakeGithub() as fake:
        yield fake


@pytest.fixture
def keys() -> Keys:
    """Keys under a prefix of their own, so tests never see each other's records."""
    return Keys(prefix=f"test-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def thread_id() -> str:
    return str(uuid.uuid4())


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The environment without any ``DRYDOCK_`` variable; set what a test needs on it."""
    for name in list(os.environ):
        if name.startswith("DRYDOCK_"):
            monkeypatch.delenv(name)
    return monkeypatch
