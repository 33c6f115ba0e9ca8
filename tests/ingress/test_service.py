"""The ingress as deployed: a plugin of the CLI, served alone (``drydock serve ingress``) or in
the web-only process (``drydock serve web``), each as a real process on the session's NATS and
Valkey."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from redis.asyncio import Redis

from drydock import services
from drydock.accounts import AccountsStore, RepositorySettings, TeamDefaults
from drydock.bus import Bus
from drydock.config import Settings
from drydock.embedded import free_port
from drydock.infra.redis import Keys
from drydock.threads import ids
from drydock.threads.inbox import Inbox
from services.ingress import router
from services.web.app import ROUTERS
from tests.fakes import signing
from tests.fakes.github import webhooks
from tests.ingress.conftest import GITHUB_SECRET, HOST, ORG
from tests.waiting import eventually


class TestRegistration:
    def test_the_service_is_registered_and_left_to_web_in_development(self) -> None:
        ingress = services.get("ingress")
        assert ingress.in_dev is False
        assert router in ROUTERS


@contextlib.asynccontextmanager
async def serving(service: str, settings: Settings, prefix: str) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """The served process's web port, and the URL of its metrics."""
    port, metrics_port = free_port(), free_port()
    environment = {key: value for key, value in os.environ.items() if not key.startswith("DRYDOCK_")} | {
        "DRYDOCK_NATS_URL": str(settings.nats.url),
        "DRYDOCK_REDIS_URL": str(settings.redis.url),
        "DRYDOCK_REDIS_KEY_PREFIX": prefix,
        "DRYDOCK_HTTP_PORT": str(port),
        "DRYDOCK_HTTP_METRICS_PORT": str(metrics_port),
        "DRYDOCK_CRYPTO_KEYS": json.dumps([key.get_secret_value() for key in settings.crypto.keys]),
        "DRYDOCK_GITHUB_WEBHOOK_SECRET": GITHUB_SECRET,
        "DRYDOCK_LOG_LEVEL": "WARNING",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "drydock",
        "serve",
        service,
        env=environment,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:

            async def ready() -> bool:
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get("/readyz")).status_code == 200:
                        return True
                if process.returncode is not None:
                    output = await process.stdout.read() if process.stdout else b""
                    pytest.fail(f"drydock serve {service} exited: {output.decode(errors='replace')}")
                return False

            # A cold interpreter importing the whole library takes seconds on a busy machine.
            await eventually(ready, within=60, every=0.05, what=f"drydock serve {service} ready")
            yield client, f"http://127.0.0.1:{metrics_port}/metrics"
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), 20)
    assert process.returncode == 0


@pytest.mark.timeout(90)
@pytest.mark.parametrize("service", ["ingress", "web"])
async def test_a_served_process_accepts_a_signed_mention(
    service: str, settings: Settings, redis: Redis, bus: Bus
) -> None:
    prefix = f"test-{uuid.uuid4().hex[:8]}"
    repo = f"widgets-{uuid.uuid4().hex[:8]}"
    accounts = AccountsStore(redis, Keys(prefix), host=HOST)
    await accounts.save_team(TeamDefaults(allowed_organizations=(ORG,)))
    await accounts.save_repository(RepositorySettings(full_name=f"{ORG}/{repo}"))
    async with serving(service, settings, prefix) as (client, metrics_url):
        request = signing.github(GITHUB_SECRET, "issue_comment", webhooks.issue_comment(ORG, repo, 1, "@drydock go"))
        response = await client.post(request.path, content=request.body, headers=request.headers)
        assert response.status_code == 200, response.text
        assert response.json()["status"] == "accepted"
        assert (await client.get("/metrics")).status_code == 404
        metrics = (await client.get(metrics_url)).text
        assert 'drydock_ingress_deliveries_total{channel="github",outcome="accepted"} 1.0' in metrics
    (stored,) = await Inbox(bus).read_after(ids.github_issue(HOST, ORG, repo, 1))
    assert stored.message.delivery_id == request.delivery_id
