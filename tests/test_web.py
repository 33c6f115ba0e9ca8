from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from nats.aio.client import Client as NatsClient
from redis.asyncio import Redis

from drydock.bus import Bus
from drydock.config import Environment, HttpSettings, Settings
from drydock.embedded import free_port
from drydock.http import DirectRoute, ListenError, create_app, serve
from drydock.infra.redis import Keys
from drydock.runtime import Runtime
from tests.routes import built
from tests.waiting import eventually


async def client_for(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://web") as client:
            yield client


@pytest.fixture
def runtime_for_web(settings: Settings, nats_client: NatsClient, bus: Bus, redis: Redis) -> Runtime:
    return Runtime(settings, nats_client, bus, redis, Keys())


@pytest.fixture
async def web(runtime_for_web: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    async for client in client_for(create_app("web", runtime_for_web)):
        yield client


class TestProbes:
    async def test_healthz(self, web: httpx.AsyncClient) -> None:
        response = await web.get("/healthz")
        assert response.status_code == 200
        assert response.json() == {"status": "ok"}

    async def test_readyz_checks_nats_and_redis(self, web: httpx.AsyncClient) -> None:
        response = await web.get("/readyz")
        assert response.status_code == 200
        assert response.json() == {"status": "ready", "checks": {"nats": "ok", "redis": "ok"}}

    async def test_readyz_reports_an_unreachable_redis(
        self, settings: Settings, nats_client: NatsClient, bus: Bus
    ) -> None:
        dead = Redis.from_url(f"redis://127.0.0.1:{free_port()}", socket_connect_timeout=0.2)
        try:
            runtime = Runtime(settings, nats_client, bus, dead, Keys())
            async for client in client_for(create_app("web", runtime)):
                response = await client.get("/readyz")
                assert response.status_code == 503
                body = response.json()
                assert body["checks"]["nats"] == "ok"
                assert body["checks"]["redis"].startswith("unreachable")
        finally:
            await dead.aclose()

    async def test_the_web_app_does_not_answer_metrics(self, web: httpx.AsyncClient) -> None:
        assert (await web.get("/metrics")).status_code == 404


async def _get(url: str) -> httpx.Response:
    """``url``'s answer once its server listens (within 30 s)."""
    deadline = asyncio.get_running_loop().time() + 30
    async with httpx.AsyncClient(trust_env=False) as client:
        while True:
            try:
                return await client.get(url, timeout=5)
            except httpx.ConnectError:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.02)


class TestMetricsPort:
    async def test_metrics_answer_on_their_own_port_only(self, runtime_for_web: Runtime) -> None:
        http = HttpSettings(port=free_port(), metrics_port=free_port())
        server = asyncio.create_task(serve(create_app("web", runtime_for_web), http))
        try:
            metrics = await _get(f"http://127.0.0.1:{http.metrics_port}/metrics")
            assert metrics.status_code == 200
            assert "process_resident_memory_bytes" in metrics.text
            assert (await _get(f"http://127.0.0.1:{http.port}/metrics")).status_code == 404
            assert (await _get(f"http://127.0.0.1:{http.metrics_port}/healthz")).status_code == 404
        finally:
            server.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await server
        with pytest.raises(httpx.ConnectError):
            async with httpx.AsyncClient(trust_env=False) as client:
                await client.get(f"http://127.0.0.1:{http.metrics_port}/metrics")

    async def test_a_busy_metrics_port_is_named(self, runtime_for_web: Runtime) -> None:
        http = HttpSettings(port=free_port(), metrics_port=free_port())
        blocker = await asyncio.start_server(lambda r, w: None, "127.0.0.1", http.metrics_port)
        try:
            with pytest.raises(ListenError, match=f"cannot listen on 127.0.0.1:{http.metrics_port}"):
                await asyncio.wait_for(serve(create_app("web", runtime_for_web), http), 10)
        finally:
            blocker.close()
            await blocker.wait_closed()


class TestApiDocuments:
    async def test_open_in_development(self, web: httpx.AsyncClient) -> None:
        assert (await web.get("/openapi.json")).status_code == 200
        assert (await web.get("/docs")).status_code == 200

    async def test_absent_from_a_production_app(self, runtime_for_web: Runtime) -> None:
        production = runtime_for_web.settings.model_copy(update={"environment": Environment.PRODUCTION})
        runtime = dataclasses.replace(runtime_for_web, settings=production)
        async for client in client_for(create_app("web", runtime)):
            for path in ("/openapi.json", "/docs", "/redoc"):
                assert (await client.get(path)).status_code == 404


def run_cli(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """``drydock ARGS`` with only ``env`` of the DRYDOCK_ variables, in ``cwd`` (by default a fresh
    directory, so that a development key it writes lands nowhere that matters)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DRYDOCK_")} | env
    with tempfile.TemporaryDirectory(prefix="drydock-cli-") as scratch:
        return subprocess.run(
            [sys.executable, "-m", "drydock", *args],
            env=environment,
            cwd=cwd or scratch,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


class TestDirectRoutes:
    @pytest.fixture
    def app(self, runtime_for_web: Runtime) -> FastAPI:
        async def hot(request: Request) -> Response:
            return JSONResponse({"body": (await request.body()).decode()})

        router = APIRouter()
        router.routes.append(DirectRoute("/hot", hot, methods=["POST"]))
        app = create_app("web", runtime_for_web, [built(router)])
        layers: list[str] = []

        @app.middleware("http")
        async def record(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
            layers.append(request.url.path)
            return await call_next(request)

        app.state.layers = layers
        return app

    async def test_a_post_to_the_path_skips_the_middleware(self, app: FastAPI) -> None:
        async for client in client_for(app):
            response = await client.post("/hot", content=b"ping")
            assert response.status_code == 200
            assert response.json() == {"body": "ping"}
            assert app.state.layers == []
            assert (await client.get("/healthz")).status_code == 200
            assert app.state.layers == ["/healthz"]

    async def test_other_methods_get_the_routers_answer(self, app: FastAPI) -> None:
        async for client in client_for(app):
            response = await client.get("/hot")
            assert response.status_code == 405
            assert app.state.layers == ["/hot"]


class TestKeepAlive:
    async def test_an_idle_connection_is_closed_after_the_setting(self, runtime_for_web: Runtime) -> None:
        http = HttpSettings(port=free_port(), metrics_port=free_port(), keep_alive=timedelta(seconds=1))
        server = asyncio.create_task(serve(create_app("web", runtime_for_web), http))
        try:

            async def connected() -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
                try:
                    return await asyncio.open_connection("127.0.0.1", http.port)
                except OSError:
                    return None

            reader, writer = await eventually(connected, what="the server listening")
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: web\r\n\r\n")
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200")
            await reader.readexactly(int(head.split(b"content-length: ")[1].split(b"\r\n")[0]))
            loop = asyncio.get_running_loop()
            idle_since = loop.time()
            assert await asyncio.wait_for(reader.read(), 5) == b"", "the server closed the connection"
            assert 0.9 <= loop.time() - idle_since < 3
            writer.close()
        finally:
            server.cancel()
            await asyncio.gather(server, return_exceptions=True)


class TestCommandLine:
    def test_version(self) -> None:
        import drydock

        result = run_cli("version")
        assert result.returncode == 0
        assert result.stdout.strip() == drydock.__version__

    def test_unreachable_nats_is_named(self, settings: Settings) -> None:
        assert settings.redis.url is not None
        result = run_cli(
            "serve", "web", DRYDOCK_NATS_URL=f"nats://127.0.0.1:{free_port()}", DRYDOCK_REDIS_URL=settings.redis.url
        )
        assert result.returncode == 1
        assert "cannot reach NATS" in result.stderr

    def test_unreachable_redis_is_named(self, settings: Settings) -> None:
        assert settings.nats.url is not None
        result = run_cli(
            "serve", "web", DRYDOCK_NATS_URL=settings.nats.url, DRYDOCK_REDIS_URL=f"redis://127.0.0.1:{free_port()}"
        )
        assert result.returncode == 1
        assert "cannot reach Redis" in result.stderr

    def test_unset_urls_are_named_with_the_way_to_get_them(self) -> None:
        result = run_cli("serve", "web")
        assert result.returncode == 2
        assert "DRYDOCK_NATS_URL and DRYDOCK_REDIS_URL not set" in result.stderr
        assert "`pdm run dev` starts embedded ones" in result.stderr

    def test_unknown_service(self, settings: Settings) -> None:
        assert settings.nats.url is not None
        assert settings.redis.url is not None
        result = run_cli("serve", "nope", DRYDOCK_NATS_URL=settings.nats.url, DRYDOCK_REDIS_URL=settings.redis.url)
        assert result.returncode == 2
        assert "unknown service 'nope'" in result.stderr


def _plain(text: str) -> str:
    """``text`` without terminal colour codes."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


class TestCryptoKeysAtStart:
    def test_production_without_keys_refuses_to_start_naming_the_setting(self, settings: Settings) -> None:
        assert settings.nats.url is not None
        assert settings.redis.url is not None
        result = run_cli(
            "serve",
            "web",
            DRYDOCK_ENVIRONMENT="production",
            DRYDOCK_NATS_URL=settings.nats.url,
            DRYDOCK_REDIS_URL=settings.redis.url,
        )
        assert result.returncode == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1
        assert lines[0].startswith("drydock: DRYDOCK_CRYPTO_KEYS is unset; web cannot")

    def test_development_without_keys_generates_one_beside_the_project(self, tmp_path: Path) -> None:
        # Unreachable NATS: the start-up gets as far as the keys and then stops.
        unreachable = {
            "DRYDOCK_NATS_URL": f"nats://127.0.0.1:{free_port()}",
            "DRYDOCK_REDIS_URL": "redis://127.0.0.1:9",
        }
        result = run_cli("serve", "web", cwd=tmp_path, **unreachable)
        key_file = tmp_path / ".drydock" / "dev" / "crypto-key"
        assert result.returncode == 1
        assert f"using the development key generated in {key_file}" in _plain(result.stderr)
        assert key_file.stat().st_mode & 0o777 == 0o600
        first = key_file.read_text()
        again = run_cli("serve", "web", cwd=tmp_path, **unreachable)
        assert "using the development key in" in _plain(again.stderr)
        assert key_file.read_text() == first


@pytest.fixture
def servers_in_environment(env: pytest.MonkeyPatch, tmp_path: Path, settings: Settings) -> Path:
    """The session's NATS and Valkey named in the environment, from a fresh working directory."""
    assert settings.nats.url is not None
    assert settings.redis.url is not None
    env.chdir(tmp_path)
    env.setenv("DRYDOCK_NATS_URL", settings.nats.url)
    env.setenv("DRYDOCK_REDIS_URL", settings.redis.url)
    return tmp_path


class TestAppFromTheEnvironment:
    async def test_development_without_keys_uses_the_development_key_from_start_up(
        self, servers_in_environment: Path
    ) -> None:
        app = create_app("web")
        key = servers_in_environment / ".drydock" / "dev" / "crypto-key"
        assert not key.exists(), "importing the app must not write anything"
        async with app.router.lifespan_context(app):
            assert key.stat().st_mode & 0o777 == 0o600

    def test_production_leaves_the_keys_to_the_operator(self, env: pytest.MonkeyPatch, tmp_path: Path) -> None:
        env.chdir(tmp_path)
        env.setenv("DRYDOCK_ENVIRONMENT", "production")
        app = create_app("web")
        assert not (tmp_path / ".drydock").exists()
        assert app.openapi_url is None

    @pytest.mark.usefixtures("servers_in_environment")
    async def test_routes_are_opened_at_start_and_closed_at_stop_while_the_runtime_is_still_open(self) -> None:
        seen: list[str] = []

        @contextlib.asynccontextmanager
        async def routes(runtime: Runtime) -> AsyncIterator[APIRouter]:
            seen.append("opened")
            try:
                yield APIRouter()
            finally:
                seen.append(f"closed with the store answering {await runtime.redis.ping()}")

        app = create_app("web", routers=[routes])
        assert seen == []
        async with app.router.lifespan_context(app):
            assert seen == ["opened"]
        assert seen == ["opened", "closed with the store answering True"]
