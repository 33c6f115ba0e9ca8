"""The HTTP side of a service: a FastAPI app with health, readiness and metrics, served by
uvicorn inside an already running event loop; for services without an app of their own, the
same probes next to their work (:func:`run_with_health`)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any

import uvicorn
from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from redis.exceptions import RedisError
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

import drydock
from drydock.config import HttpSettings, load_settings
from drydock.errors import describe
from drydock.infra.read_deadline import with_read_deadline
from drydock.runtime import Runtime, open_runtime
from drydock.telemetry import metrics_response

RouterFactory = Callable[[Runtime], APIRouter]
"""Builds a service's routes on a runtime; the web app's are listed in ``services.web.app``."""


async def readiness(runtime: Runtime) -> dict[str, str]:
    """``ok`` or the reason, per dependency."""
    checks = {"nats": "ok" if runtime.nats.is_connected else "not connected"}
    try:
        await asyncio.wait_for(runtime.redis.ping(), 1.0)
        checks["redis"] = "ok"
    except (RedisError, OSError, TimeoutError) as error:
        checks["redis"] = f"unreachable: {describe(error)}"
    if checks["redis"] == "ok" and runtime.store is not None:
        try:
            lost = await asyncio.wait_for(runtime.store.check(), 1.0)
            checks["store"] = "ok" if lost is None else lost
        except (RedisError, OSError, TimeoutError) as error:
            checks["store"] = f"unreadable: {describe(error)}"
    return checks


class DirectRoute(Route):
    """A route the app serves ahead of its middleware stack and router, for hot endpoints that
    use neither (the webhooks): on a POST to the exact path the route's endpoint is called
    straight away. Unexpected errors still become a 500, from the server."""


class _App(FastAPI):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.direct: dict[str, DirectRoute] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            route = self.direct.get(scope["path"])
            if route is not None and route.methods is not None and scope["method"] in route.methods:
                scope["app"] = self
                await route.app(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def create_app(name: str, runtime: Runtime | None = None, routers: list[RouterFactory] | None = None) -> FastAPI:
    """The service's app. Without a runtime, its lifespan opens one from the environment."""

    @contextlib.asynccontextmanager
    async def lifespan(app: _App) -> AsyncIterator[None]:
        if runtime is not None:
            _mount(app, runtime, routers or [])
            yield
            return
        async with open_runtime(load_settings(), name=name) as opened:
            _mount(app, opened, routers or [])
            yield

    app = _App(title=f"Drydock {name}", version=drydock.__version__, lifespan=lifespan)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", include_in_schema=False)
    async def readyz(request: Request) -> JSONResponse:
        checks = await readiness(request.app.state.runtime)
        ready = all(value == "ok" for value in checks.values())
        return JSONResponse({"status": "ready" if ready else "not ready", "checks": checks}, 200 if ready else 503)

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        body, content_type = metrics_response()
        return Response(body, media_type=content_type)

    return app


def _mount(app: _App, runtime: Runtime, routers: list[RouterFactory]) -> None:
    app.state.runtime = runtime
    for factory in routers:
        router = factory(runtime)
        app.direct.update({route.path: route for route in router.routes if isinstance(route, DirectRoute)})
        app.include_router(router)


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server that leaves signal handling to the process that runs it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class ListenError(RuntimeError):
    """The HTTP server cannot listen on its address (in use, not permitted)."""


def _listen(host: str, port: int) -> socket.socket:
    # Bound here rather than by uvicorn, which answers a busy port with sys.exit inside the task.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise ListenError(
            f"cannot listen on {host}:{port}: {error.strerror or error} "
            "(set DRYDOCK_HTTP_PORT, or DRYDOCK_HTTP_HOST, to another address)"
        ) from None
    return sock


def server_config(app: FastAPI, http: HttpSettings, **options: Any) -> uvicorn.Config:
    """uvicorn's configuration for ``app`` by ``http``: the idle timeout of a kept-alive
    connection, and the deadline on receiving each request (:mod:`drydock.infra.read_deadline`);
    ``options`` are passed on (``lifespan``, ``host``, ``port``)."""
    return uvicorn.Config(
        app,
        **{
            "log_config": None,
            "lifespan": "on",
            "timeout_keep_alive": math.ceil(http.keep_alive.total_seconds()),
            "http": with_read_deadline(http.read_timeout.total_seconds()),
            **options,
        },
    )


async def serve(app: FastAPI, http: HttpSettings) -> None:
    """Serve on ``http.host``:``http.port`` until cancelled, then shut down gracefully;
    :class:`ListenError` if the address cannot be bound."""
    host, port = http.host, http.port
    sock = _listen(host, port)
    server = _EmbeddedServer(server_config(app, http, host=host, port=port))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        server.should_exit = True
        await task
        raise
    finally:
        sock.close()
    if not server.started:
        raise RuntimeError(f"HTTP server could not start on {host}:{port}")


async def run_with_health(name: str, work: Coroutine[Any, Any, None], runtime: Runtime) -> None:
    """Run ``work`` while answering ``/healthz``, ``/readyz`` and ``/metrics`` on
    ``settings.http.host``:``port``. When either ends, the other is stopped; an error of
    either (a port already in use) is raised."""
    http = runtime.settings.http
    listener = asyncio.create_task(serve(create_app(name, runtime), http), name="health")
    worker = asyncio.create_task(work, name=name)
    try:
        done, _ = await asyncio.wait({listener, worker}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (listener, worker):
            task.cancel()
        await asyncio.gather(listener, worker, return_exceptions=True)
    for task in done:
        task.result()
