"""``drydock serve`` gives a service without an HTTP app of its own (a worker) the health,
readiness and metrics endpoints, so that Kubernetes probes reach every service."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from nats.aio.client import Client as NatsClient
from redis.asyncio import Redis

from drydock.bus import Bus
from drydock.cli import run_service
from drydock.config import Settings
from drydock.embedded import free_port
from drydock.http import ListenError
from drydock.infra.redis import Keys
from drydock.runtime import Runtime
from drydock.services import Service
from tests.waiting import eventually


class Worker:
    """A service body that runs until told to stop."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.stop = asyncio.Event()
        self.cancelled = False

    async def run(self, runtime: Runtime) -> None:
        self.started.set()
        try:
            await self.stop.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise


def runtime_on(settings: Settings, nats_client: NatsClient, bus: Bus, redis: Redis, **http: object) -> Runtime:
    chosen = settings.model_copy(
        update={
            "http": settings.http.model_copy(
                update={"host": "127.0.0.1", "port": free_port(), "metrics_port": free_port()} | http
            )
        }
    )
    return Runtime(chosen, nats_client, bus, redis, Keys())


def service(worker: Worker, *, has_http: bool) -> Service:
    return Service(name="test-worker", description="", run=worker.run, listens=lambda _: "", has_http=has_http)


async def answering(url: str) -> httpx.Response:
    async with httpx.AsyncClient(trust_env=False) as client:

        async def get() -> httpx.Response | None:
            try:
                return await client.get(url, timeout=1.0)
            except httpx.ConnectError:
                return None

        return await eventually(get, what=f"an answer at {url}")


async def refused(url: str) -> bool:
    async with httpx.AsyncClient(trust_env=False) as client:
        try:
            await client.get(url, timeout=1.0)
        except httpx.ConnectError:
            return True
    return False


@pytest.fixture
async def worker() -> Worker:
    return Worker()


class TestHealthListener:
    async def test_a_service_without_http_answers_the_probes_while_it_runs(
        self, worker: Worker, settings: Settings, nats_client: NatsClient, bus: Bus, redis: Redis
    ) -> None:
        runtime = runtime_on(settings, nats_client, bus, redis)
        base = f"http://127.0.0.1:{runtime.settings.http.port}"
        running = asyncio.create_task(run_service(service(worker, has_http=False), runtime))
        await worker.started.wait()
        assert (await answering(f"{base}/healthz")).json() == {"status": "ok"}
        ready = await answering(f"{base}/readyz")
        assert (ready.status_code, ready.json()["checks"]) == (200, {"nats": "ok", "redis": "ok"})
        metrics = await answering(f"http://127.0.0.1:{runtime.settings.http.metrics_port}/metrics")
        assert metrics.status_code == 200
        assert (await answering(f"{base}/metrics")).status_code == 404
        assert metrics.headers["content-type"].startswith("text/plain")
        worker.stop.set()
        await asyncio.wait_for(running, 10)
        assert await refused(f"{base}/healthz")

    async def test_the_work_stops_when_the_listener_cannot_start(
        self, worker: Worker, settings: Settings, nats_client: NatsClient, bus: Bus, redis: Redis
    ) -> None:
        runtime = runtime_on(settings, nats_client, bus, redis)
        blocker = await asyncio.start_server(lambda r, w: None, "127.0.0.1", runtime.settings.http.port)
        try:
            with pytest.raises(ListenError, match=f"cannot listen on 127.0.0.1:{runtime.settings.http.port}"):
                await asyncio.wait_for(run_service(service(worker, has_http=False), runtime), 10)
        finally:
            blocker.close()
            await blocker.wait_closed()
        assert worker.cancelled

    @pytest.mark.parametrize(("has_http", "listener"), [(True, True), (False, False)])
    async def test_no_listener_for_services_with_their_own_app_or_when_switched_off(
        self,
        worker: Worker,
        settings: Settings,
        nats_client: NatsClient,
        bus: Bus,
        redis: Redis,
        has_http: bool,
        listener: bool,
    ) -> None:
        runtime = runtime_on(settings, nats_client, bus, redis, health_listener=listener)
        running = asyncio.create_task(run_service(service(worker, has_http=has_http), runtime))
        await worker.started.wait()
        assert await refused(f"http://127.0.0.1:{runtime.settings.http.port}/healthz")
        worker.stop.set()
        await asyncio.wait_for(running, 10)
