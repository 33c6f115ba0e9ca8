"""The HTTP side of a service: a FastAPI app with health and readiness, served by uvicorn inside
an already running event loop, with ``/metrics`` on a port of its own (``metrics_port``) so that
the public port never answers it; for services without an app of their own, the same probes
next to their work (:func:`run_with_health`). The OpenAPI document and its pages (``/docs``,
``/openapi.json``) are open in development only; in production the app has none, and the
dashboard serves them to signed-in people. The page is Swagger UI from the package's own files
(:mod:`drydock.swagger`), never a CDN."""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, Literal

import uvicorn
from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse
from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

import drydock
from drydock import swagger
from drydock.config import Environment, HttpSettings, Settings, load_settings
from drydock.errors import describe
from drydock.infra.read_deadline import with_read_deadline
from drydock.runtime import Runtime, open_runtime
from drydock.telemetry import metrics_response, workers_registry
from drydock.telemetry.tracing import traced_asgi

RouterFactory = Callable[[Runtime], contextlib.AbstractAsyncContextManager[APIRouter]]
"""Opens a service's routes on a runtime when the app starts, and closes what they hold (clients,
writes still waiting) when it stops; the web app's are listed in ``services.web.app``."""


ErrorPage = Callable[[Request, int, str], Awaitable[Response]]
"""An HTML page for an error status and its detail."""


class SiteRouter(APIRouter):
    """A router with pages: the app it is mounted in answers browsers' requests that no route
    handles (an unknown page, an unexpected error) with its ``error_page``, not JSON. API and
    webhook paths, and clients that do not ask for HTML, keep JSON."""

    def __init__(self, error_page: ErrorPage, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error_page = error_page


_JSON_PREFIXES = ("/api/", "/webhooks/", "/openapi.json")


def _wants_html(request: Request) -> bool:
    return (
        request.method in {"GET", "HEAD"}
        and "text/html" in request.headers.get("accept", "")
        and not request.url.path.startswith(_JSON_PREFIXES)
    )


async def _http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, StarletteHTTPException)
    page: ErrorPage | None = getattr(request.app.state, "error_page", None)
    if page is not None and _wants_html(request):
        return await page(request, error.status_code, str(error.detail))
    return await http_exception_handler(request, error)


async def _server_error(request: Request, error: Exception) -> Response:
    # Starlette still raises the error after this answer, so the server logs it with its traceback.
    page: ErrorPage | None = getattr(request.app.state, "error_page", None)
    if page is not None and _wants_html(request):
        return await page(request, 500, "Something went wrong on our side; it is logged. Try again shortly.")
    return JSONResponse({"detail": "Internal Server Error"}, status_code=500)


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
        # Around the direct routes too, so a webhook's trace starts with its request.
        self._traced = traced_asgi(self._dispatch)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._traced is not None:
            await self._traced(scope, receive, send)
        else:
            await self._dispatch(scope, receive, send)

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            route = self.direct.get(scope["path"])
            if route is not None and route.methods is not None and scope["method"] in route.methods:
                scope["app"] = self
                await route.app(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def create_app(name: str, runtime: Runtime | None = None, routers: list[RouterFactory] | None = None) -> FastAPI:
    """The service's app. Without a runtime, its lifespan opens one from the environment (with
    the development key when ``DRYDOCK_CRYPTO_KEYS`` is unset in development, as ``drydock dev``)."""
    settings = runtime.settings if runtime is not None else load_settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: _App) -> AsyncIterator[None]:
        # Entered in this order so that the routes close what they hold (the ingress's last done
        # marks) while the runtime they write through is still open.
        async with contextlib.AsyncExitStack() as stack:
            if runtime is not None:
                await _mount(app, runtime, routers or [], stack)
            else:
                # The development key is read (or made) at start-up, not when the module is imported.
                opened = await stack.enter_async_context(open_runtime(_with_development_keys(settings), name=name))
                await _mount(app, opened, routers or [], stack)
            yield

    documented = settings.environment is Environment.DEVELOPMENT
    app = _App(
        title=f"Drydock {name}",
        version=drydock.__version__,
        lifespan=lifespan,
        openapi_url="/openapi.json" if documented else None,
        docs_url=None,
        redoc_url=None,
    )
    if documented:
        app.include_router(swagger.router("/openapi.json", f"{app.title} API"))
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _server_error)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", include_in_schema=False)
    async def readyz(request: Request) -> JSONResponse:
        checks = await readiness(request.app.state.runtime)
        ready = all(value == "ok" for value in checks.values())
        return JSONResponse({"status": "ready" if ready else "not ready", "checks": checks}, 200 if ready else 503)

    return app


def metrics_app(*, all_workers: bool = False) -> Starlette:
    """The app of the metrics port: ``/metrics`` (Prometheus' text format) and nothing else;
    ``all_workers``: the counters of every worker process (:func:`drydock.telemetry.workers_registry`)."""
    registry = workers_registry() if all_workers else None

    async def metrics(_: Request) -> Response:
        body, content_type = metrics_response() if registry is None else metrics_response(registry)
        return Response(body, media_type=content_type)

    return Starlette(routes=[Route("/metrics", metrics, methods=["GET"])])


def _with_development_keys(settings: Settings) -> Settings:
    if settings.environment is Environment.DEVELOPMENT:
        from drydock.dev import with_development_keys

        settings = with_development_keys(settings)
    return settings


async def _mount(app: _App, runtime: Runtime, routers: list[RouterFactory], stack: contextlib.AsyncExitStack) -> None:
    app.state.runtime = runtime
    for factory in routers:
        router = await stack.enter_async_context(factory(runtime))
        if isinstance(router, SiteRouter):
            app.state.error_page = router.error_page
        app.direct.update({route.path: route for route in router.routes if isinstance(route, DirectRoute)})
        app.include_router(router)


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server that leaves signal handling to the process that runs it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class ListenError(RuntimeError):
    """The HTTP server cannot listen on its address (in use, not permitted)."""


def _listen(host: str, port: int, setting: str = "DRYDOCK_HTTP_PORT", *, shared: bool = False) -> socket.socket:
    """``shared``: with SO_REUSEPORT, so that the other worker processes listen on it too."""
    # Bound here rather than by uvicorn, which answers a busy port with sys.exit inside the task.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if shared:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise ListenError(
            f"cannot listen on {host}:{port}: {error.strerror or error} "
            f"(set {setting}, or DRYDOCK_HTTP_HOST, to another address)"
        ) from None
    return sock


def server_config(app: ASGIApp, http: HttpSettings, **options: Any) -> uvicorn.Config:
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


def _server(app: ASGIApp, sock: socket.socket, http: HttpSettings, *, lifespan: Literal["on", "off"]) -> uvicorn.Server:
    return _EmbeddedServer(server_config(app, http, host=http.host, port=sock.getsockname()[1], lifespan=lifespan))


async def serve(app: FastAPI, http: HttpSettings) -> None:
    """Serve ``app`` on ``http.host``:``http.port`` and :func:`metrics_app` on
    ``http.metrics_port`` until cancelled, then shut down gracefully; :class:`ListenError` if
    an address cannot be bound."""
    workers = http.workers > 1 and http.worker_index > 0
    sockets = [_listen(http.host, http.port, shared=workers)]
    servers = [_server(app, sockets[0], http, lifespan="on")]
    # Of several worker processes the first serves every one's metrics.
    if http.worker_index <= 1:
        try:
            sockets.append(_listen(http.host, http.metrics_port, "DRYDOCK_HTTP_METRICS_PORT"))
        except ListenError:
            sockets[0].close()
            raise
        servers.append(_server(metrics_app(all_workers=workers), sockets[1], http, lifespan="off"))
    tasks = [asyncio.create_task(server.serve(sockets=[sock])) for server, sock in zip(servers, sockets, strict=True)]
    try:
        await asyncio.shield(asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED))
    finally:
        # Cancelled or one server ended: the other stops too, gracefully.
        for server in servers:
            server.should_exit = True
        await asyncio.gather(*tasks, return_exceptions=True)
        for sock in sockets:
            sock.close()
    for task in tasks:
        task.result()
    if not servers[0].started:
        raise RuntimeError(f"HTTP server could not start on {http.host}:{http.port}")


async def run_with_health(name: str, work: Coroutine[Any, Any, None], runtime: Runtime) -> None:
    """Run ``work`` while answering ``/healthz`` and ``/readyz`` on ``settings.http.host``:``port``
    (and ``/metrics`` on ``metrics_port``). When either ends, the other is stopped; an error of
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
