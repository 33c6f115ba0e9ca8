"""While the store restarts, the proxy answers 503 with ``Retry-After`` (a clone retries it),
never a 500 that reads as final; once the store is back, the same grant works again. The store is
a real Valkey of the test's own, stopped and started."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from nats.aio.client import Client as NatsClient
from redis.asyncio import Redis

from drydock.bus import Bus
from drydock.config import Settings
from drydock.credentials import ProxyCredentials
from drydock.embedded import EmbeddedServer
from drydock.infra.redis import Keys, connect_redis
from drydock.roles import Role
from drydock.runtime import Runtime
from drydock.sandbox.backend import CommandResult
from drydock.worker.clone_retries import clone_with_retries
from services.credential_proxy.server import Listening, serving
from tests.credentials.conftest import REPOSITORY
from tests.credentials.sandbox_side import apply_grant, clone_attempt, handle_for
from tests.fakes.git_server import GitError, git


@pytest.fixture
async def own_redis(credential_settings: Settings, own_valkey: EmbeddedServer) -> AsyncIterator[Redis]:
    client = await connect_redis(credential_settings.redis, url=own_valkey.url)
    yield client
    await client.aclose()


@pytest.fixture
async def own_proxy(
    credential_settings: Settings, nats_client: NatsClient, bus: Bus, own_redis: Redis, keys: Keys
) -> AsyncIterator[tuple[Listening, ProxyCredentials]]:
    async with serving(Runtime(credential_settings, nats_client, bus, own_redis, keys)) as listening:
        section = credential_settings.proxy.model_copy(
            update={"url": listening.url, "egress_url": listening.egress_url}
        )
        broker = ProxyCredentials.create(credential_settings.model_copy(update={"proxy": section}), own_redis, keys)
        try:
            yield listening, broker
        finally:
            await broker.aclose()


class TestStoreOutage:
    async def test_a_grant_lookup_during_a_restart_is_a_503_to_retry_and_works_after_it(
        self,
        own_proxy: tuple[Listening, ProxyCredentials],
        own_valkey: EmbeddedServer,
        sandbox_home: Path,
        thread_id: str,
    ) -> None:
        listening, credentials = own_proxy
        grant = await credentials.issue(
            handle_for(thread_id, sandbox_home), thread_id=thread_id, role=Role.CODER, repository=REPOSITORY
        )
        assert grant.token is not None
        refs = f"{listening.url}/g/{grant.token}/git/{REPOSITORY}.git/info/refs?service=git-upload-pack"
        api = f"{listening.url}/g/{grant.token}/api/repos/{REPOSITORY}"
        env = await apply_grant(grant, sandbox_home)

        await own_valkey.stop()
        async with httpx.AsyncClient(timeout=30) as client:
            git_answer, api_answer = await client.get(refs), await client.get(api)
        with pytest.raises(GitError, match="503"):
            await git("clone", "-q", f"https://github.com/{REPOSITORY}.git", str(sandbox_home / "lost"), env=env)
        await own_valkey.start()
        async with httpx.AsyncClient(timeout=30) as client:
            after = await client.get(refs)

        assert git_answer.status_code == 503
        assert git_answer.headers["Retry-After"] == "2"
        assert "store is unavailable" in git_answer.text
        assert api_answer.status_code == 503
        assert api_answer.headers["Retry-After"] == "2"
        assert "store is unavailable" in api_answer.json()["message"]
        assert after.status_code == 200
        await git("clone", "-q", f"https://github.com/{REPOSITORY}.git", str(sandbox_home / "widgets"), env=env)
        assert (sandbox_home / "widgets" / "README.md").read_text() == "# widgets\n"

    async def test_a_clone_retried_across_the_restart_succeeds(
        self,
        own_proxy: tuple[Listening, ProxyCredentials],
        own_valkey: EmbeddedServer,
        sandbox_home: Path,
        thread_id: str,
    ) -> None:
        _, credentials = own_proxy
        grant = await credentials.issue(
            handle_for(thread_id, sandbox_home), thread_id=thread_id, role=Role.CODER, repository=REPOSITORY
        )
        env = await apply_grant(grant, sandbox_home)
        work = sandbox_home / "widgets"
        attempts: list[CommandResult] = []

        async def attempt() -> CommandResult:
            attempts.append(await clone_attempt(f"https://github.com/{REPOSITORY}.git", work, env))
            if len(attempts) == 1:
                # The store comes back after the first answer (a 503, once the proxy's own Redis
                # retries gave up), while the clone waits to try again.
                await own_valkey.start()
            return attempts[-1]

        await own_valkey.stop()
        result = await clone_with_retries(attempt, repository=REPOSITORY, thread_id=thread_id, window=60)

        assert result.exit_code == 0
        assert len(attempts) > 1
        assert all("returned error: 503" in failed.output for failed in attempts[:-1])
        assert (work / "README.md").read_text() == "# widgets\n"
