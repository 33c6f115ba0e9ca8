"""When NATS or Redis cannot take a delivery the ingress answers 503 (with Retry-After) so the
sender retries, forgets its claim, and accepts the retry once the dependency is back. These
tests run their own servers, which they stop and restart."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import structlog
from nats.aio.client import Client as NatsClient

from drydock.accounts import AccountsStore, RepositorySettings, TeamDefaults
from drydock.bus import Bus, connect_nats, provision, topology
from drydock.bus.streams import INBOX_STREAM
from drydock.channels.outbound import Outbound
from drydock.config import Settings
from drydock.embedded import EmbeddedServer, nats_server, valkey_server
from drydock.http import create_app
from drydock.infra.redis import Keys, connect_redis
from drydock.infra.store_epoch import establish
from drydock.runtime import Runtime
from drydock.threads import ids
from drydock.threads.inbox import Inbox
from services.ingress.accept import Ingress
from services.ingress.webhooks import webhook_router
from tests.fakes import signing
from tests.fakes.github import webhooks
from tests.fakes.loopback import LoopbackServer
from tests.ingress.conftest import GITHUB_SECRET, HOST, ORG, ingress_settings
from tests.routes import built
from tests.waiting import eventually

REPO = "widgets"


@contextlib.asynccontextmanager
async def own_servers() -> AsyncIterator[tuple[EmbeddedServer, EmbeddedServer]]:
    with tempfile.TemporaryDirectory(prefix="drydock-ingress-outage-") as tmp:
        nats, valkey = nats_server(Path(tmp) / "nats"), valkey_server(Path(tmp))
        (Path(tmp) / "nats").mkdir(exist_ok=True)
        await nats.start()
        await valkey.start()
        try:
            yield nats, valkey
        finally:
            await nats.stop()
            await valkey.stop()


@contextlib.asynccontextmanager
async def silent_store() -> AsyncIterator[str]:
    """A Redis URL whose server accepts connections and never answers."""
    connections: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        while await reader.read(65536):
            pass

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    async with server:
        yield f"redis://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        for writer in connections:
            writer.close()


@contextlib.asynccontextmanager
async def ingress_on(
    settings: Settings,
    nats: EmbeddedServer,
    valkey: EmbeddedServer,
    *,
    store: str | None = None,
    accept_timeout: timedelta | None = None,
) -> AsyncIterator[tuple[httpx.AsyncClient, NatsClient, Bus]]:
    """The ingress on ``nats`` and ``valkey``; ``store`` is another Redis for the ingress's own
    client (the test's setup still goes to ``valkey``)."""
    own = ingress_settings(settings).model_copy(
        update={
            "nats": settings.nats.model_copy(update={"url": nats.url}),
            "redis": settings.redis.model_copy(update={"url": valkey.url}),
        }
    )
    nc = await connect_nats(own.nats, name="ingress-outage-test")
    redis = await connect_redis(own.redis)
    if store is not None:
        own = own.model_copy(update={"redis": own.redis.model_copy(update={"url": store})})
    if accept_timeout is not None:
        own = own.model_copy(update={"ingress": own.ingress.model_copy(update={"accept_timeout": accept_timeout})})
    bus = Bus(nc, timeout=1.0)
    await provision(bus.js, topology(own.nats))
    keys = Keys("outage")
    accounts = AccountsStore(redis, keys, host=HOST)
    await accounts.save_team(TeamDefaults(allowed_organizations=(ORG,)))
    await accounts.save_repository(RepositorySettings(full_name=f"{ORG}/{REPO}"))
    runtime = Runtime(own, nc, bus, redis, keys, await establish(bus.js, redis, keys))
    ingress = Ingress(runtime, Outbound({}, {}, []))
    app = create_app("ingress-outage", runtime, [built(webhook_router(ingress))])
    try:
        async with LoopbackServer(app, lifespan=True) as server, httpx.AsyncClient(base_url=server.base_url) as client:
            yield client, nc, bus
    finally:
        await ingress.aclose()
        await redis.aclose()
        await nc.close()


def mention(number: int) -> signing.SignedRequest:
    payload = webhooks.issue_comment(ORG, REPO, number, "@drydock please fix")
    return signing.github(GITHUB_SECRET, "issue_comment", payload)


async def send(client: httpx.AsyncClient, request: signing.SignedRequest) -> httpx.Response:
    return await client.post(request.path, content=request.body, headers=request.headers)


@pytest.mark.timeout(60)
class TestUnavailable:
    async def test_nats_down_answers_503_and_the_retry_succeeds_once_it_is_back(self, settings: Settings) -> None:
        async with own_servers() as (nats, valkey), ingress_on(settings, nats, valkey) as (client, nc, bus):
            request = mention(1)
            await nats.stop()
            response = await send(client, request)
            assert response.status_code == 503
            assert response.headers["retry-after"] == "5"
            assert "message bus" in response.json()["error"]
            await nats.start()
            await eventually(lambda: nc.is_connected, within=30, what="the ingress's NATS reconnected")
            retried = await send(client, request)
            assert retried.status_code == 200, retried.text
            thread_id = ids.github_issue(HOST, ORG, REPO, 1)
            assert len(await Inbox(bus).read_after(thread_id)) == 1

    async def test_an_unacknowledged_publish_answers_503_and_releases_the_claim(self, settings: Settings) -> None:
        async with own_servers() as (nats, valkey), ingress_on(settings, nats, valkey) as (client, _, bus):
            await bus.js.delete_stream(INBOX_STREAM)
            request = mention(2)
            response = await send(client, request)
            assert response.status_code == 503
            await provision(bus.js, topology(settings.nats))
            retried = await send(client, request)
            assert retried.status_code == 200, retried.text
            assert retried.json()["status"] == "accepted"

    async def test_after_a_failed_delivery_the_retry_is_routed_once_and_a_replay_is_a_duplicate(
        self, settings: Settings
    ) -> None:
        async with own_servers() as (nats, valkey), ingress_on(settings, nats, valkey) as (client, _, bus):
            await bus.js.delete_stream(INBOX_STREAM)
            request = mention(6)
            assert (await send(client, request)).status_code == 503
            await provision(bus.js, topology(settings.nats))
            assert (await send(client, request)).json()["status"] == "accepted"
            replay = await send(client, request.with_headers(X_GitHub_Delivery=str(uuid.uuid4())))
            assert (replay.status_code, replay.json()["status"]) == (200, "duplicate")
            assert len(await Inbox(bus).read_after(ids.github_issue(HOST, ORG, REPO, 6))) == 1

    async def test_after_a_failed_delivery_a_replay_is_routed_once_and_the_retry_is_a_duplicate(
        self, settings: Settings
    ) -> None:
        async with own_servers() as (nats, valkey), ingress_on(settings, nats, valkey) as (client, _, bus):
            await bus.js.delete_stream(INBOX_STREAM)
            request = mention(7)
            assert (await send(client, request)).status_code == 503
            await provision(bus.js, topology(settings.nats))
            replay = await send(client, request.with_headers(X_GitHub_Delivery=str(uuid.uuid4())))
            assert replay.json()["status"] == "accepted"
            retried = await send(client, request)
            assert (retried.status_code, retried.json()["status"]) == (200, "duplicate")
            assert len(await Inbox(bus).read_after(ids.github_issue(HOST, ORG, REPO, 7))) == 1

    async def test_redis_down_answers_503(self, settings: Settings) -> None:
        async with own_servers() as (nats, valkey), ingress_on(settings, nats, valkey) as (client, _, bus):
            await valkey.stop()
            response = await send(client, mention(3))
            assert response.status_code == 503
            assert "store" in response.json()["error"]
            assert await Inbox(bus).read_after(ids.github_issue(HOST, ORG, REPO, 3)) == []

    async def test_a_store_that_never_answers_gets_503_at_the_deadline(self, settings: Settings) -> None:
        async with (
            own_servers() as (nats, valkey),
            silent_store() as store,
            ingress_on(settings, nats, valkey, store=store, accept_timeout=timedelta(seconds=0.5)) as (client, _, bus),
        ):
            loop = asyncio.get_running_loop()
            started = loop.time()
            response = await send(client, mention(4))
            assert response.status_code == 503
            assert response.json()["error"] == "temporarily unavailable: not made durable within 0.5 s"
            assert loop.time() - started < 2
            assert await Inbox(bus).read_after(ids.github_issue(HOST, ORG, REPO, 4)) == []


@pytest.mark.timeout(60)
class TestStoreLoss:
    """A store that lost its data (restarted empty, wiped) never turns a delivery into a 2xx."""

    async def test_a_wiped_store_answers_503_and_every_readiness_says_what_was_lost(self, settings: Settings) -> None:
        async with own_servers() as (nats, valkey), ingress_on(settings, nats, valkey) as (client, _, bus):
            assert (await client.get("/readyz")).status_code == 200
            wiper = await connect_redis(settings.redis, url=valkey.url)
            await wiper.flushall()
            await wiper.aclose()

            with structlog.testing.capture_logs() as logs:
                response = await send(client, mention(5))
                ready = await client.get("/readyz")

            assert response.status_code == 503
            assert response.headers["retry-after"] == "5"
            assert "the store lost its data" in response.json()["error"]
            assert await Inbox(bus).read_after(ids.github_issue(HOST, ORG, REPO, 5)) == []
            assert ready.status_code == 503
            assert ready.json()["checks"]["store"].startswith("the store lost its data")
            lost = [entry["event"] for entry in logs if entry["event"].startswith("store lost")]
            assert len(lost) == 1
            assert "--accept-store-loss" in lost[0]

    async def test_an_operator_who_accepts_the_loss_makes_the_services_ready_again(self, settings: Settings) -> None:
        async with own_servers() as (nats, valkey), ingress_on(settings, nats, valkey) as (client, _, bus):
            store = await connect_redis(settings.redis, url=valkey.url)
            await store.flushall()
            assert (await client.get("/readyz")).status_code == 503

            await establish(bus.js, store, Keys("outage"), accept_loss=True)
            await store.aclose()

            ready = await client.get("/readyz")
            assert ready.status_code == 200, ready.text
