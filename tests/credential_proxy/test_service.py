"""The ``credential-proxy`` service as its own process, and its health routes."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet
from nats.aio.client import Client as NatsClient
from pydantic import SecretStr
from redis.asyncio import Redis

from drydock import services
from drydock.bus import Bus
from drydock.config import Settings
from drydock.credentials import SecretCipher, TokenVault, UpstreamToken
from drydock.credentials.user_tokens import UserTokens
from drydock.embedded import EmbeddedUrls, free_port
from drydock.infra.redis import Keys
from drydock.infra.server_keys import MissingServerKeys
from drydock.runtime import Runtime
from services.credential_proxy.server import serving
from tests.waiting import eventually


class TestRegistration:
    def test_registered_under_its_name(self) -> None:
        assert services.get("credential-proxy").name == "credential-proxy"


@pytest.fixture
async def process(infra: EmbeddedUrls, crypto_key: str) -> AsyncIterator[tuple[str, str]]:
    assert infra.nats is not None
    assert infra.redis is not None
    port, egress_port = free_port(), free_port()
    env = {
        **{name: value for name, value in os.environ.items() if not name.startswith("DRYDOCK_")},
        "DRYDOCK_NATS_URL": infra.nats,
        "DRYDOCK_REDIS_URL": infra.redis,
        "DRYDOCK_CRYPTO_KEYS": f'["{crypto_key}"]',
        "DRYDOCK_PROXY_PORT": str(port),
        "DRYDOCK_PROXY_EGRESS_PORT": str(egress_port),
    }
    child = await asyncio.create_subprocess_exec(
        Path(sys.executable).parent / "drydock", "serve", "credential-proxy", env=env, stdout=asyncio.subprocess.PIPE
    )
    try:
        yield f"http://127.0.0.1:{port}", f"http://127.0.0.1:{egress_port}"
    finally:
        child.terminate()
        await child.wait()


class TestProcess:
    async def test_serves_health_readiness_and_metrics(self, process: tuple[str, str]) -> None:
        url, _ = process
        async with httpx.AsyncClient(base_url=url, trust_env=False) as client:

            async def answered() -> httpx.Response | None:
                try:
                    return await client.get("/healthz")
                except httpx.TransportError:
                    return None

            # A cold interpreter importing the whole library takes seconds on a busy machine.
            health = await eventually(answered, within=60, every=0.05, what="credential-proxy started")
            ready = await client.get("/readyz")
            metrics = await client.get("/metrics")
        assert health.json() == {"status": "ok"}
        assert ready.status_code == 200, ready.text
        assert ready.json()["checks"] == {"nats": "ok", "redis": "ok", "store": "ok"}
        assert "drydock_proxy_requests" in metrics.text


class TestWithoutEncryptionKeys:
    async def test_refuses_to_start_naming_the_setting(
        self, credential_settings: Settings, nats_client: NatsClient, bus: Bus, redis: Redis, keys: Keys
    ) -> None:
        settings = credential_settings.model_copy(
            update={"crypto": credential_settings.crypto.model_copy(update={"keys": []})}
        )
        with pytest.raises(MissingServerKeys, match="DRYDOCK_CRYPTO_KEYS"):
            async with serving(Runtime(settings, nats_client, bus, redis, keys)):
                pytest.fail("the credential proxy started without keys to verify grants with")


class TestKeyRotationAtStart:
    async def test_tokens_and_users_tokens_written_under_an_old_key_are_re_encrypted(
        self,
        credential_settings: Settings,
        crypto_key: str,
        nats_client: NatsClient,
        bus: Bus,
        redis: Redis,
        keys: Keys,
    ) -> None:
        old = SecretCipher([crypto_key])
        await TokenVault(redis, keys, old).put("d1", _upstream("ghs_old_key"))
        await UserTokens(redis, keys, old).put("user-1", "gho_users_own")
        newest = Fernet.generate_key().decode()
        rotated = credential_settings.crypto.model_copy(update={"keys": [SecretStr(newest), SecretStr(crypto_key)]})
        settings = credential_settings.model_copy(update={"crypto": rotated})
        async with serving(Runtime(settings, nats_client, bus, redis, keys)) as listening:
            await listening.reencryption
        # Readable with the newest key alone: the old one can be retired.
        stored = await TokenVault(redis, keys, SecretCipher([newest])).get("d1")
        assert stored is not None
        assert stored.token == "ghs_old_key"
        assert await UserTokens(redis, keys, SecretCipher([newest])).get("user-1") == "gho_users_own"


def _upstream(token: str) -> UpstreamToken:
    return UpstreamToken(token=token, expires_at=datetime.now(UTC) + timedelta(hours=1))
