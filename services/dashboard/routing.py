"""Route classes of the dashboard's one router: they turn a :class:`DashboardError` (and a lost
dependency) into the answer its caller understands, and add the headers every answer needs.

The router is mounted into apps the dashboard does not own (the web-only process), so nothing
here relies on app-level exception handlers or middleware."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import quote

import structlog
from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.routing import APIRoute
from redis.exceptions import RedisError

from drydock.bus import BusUnavailable
from services.dashboard.errors import DashboardError, FieldError, Invalid, NotSignedIn, Unavailable

log = structlog.get_logger(__name__)

Handler = Callable[[Request], Coroutine[Any, Any, Response]]
ErrorPage = Callable[[Request, DashboardError], Response]

PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' https: data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
API_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


def _lost(error: Exception, request: Request) -> Unavailable:
    log.warning("dashboard dependency unavailable", path=request.url.path, error=repr(error))
    return Unavailable("a dependency of the dashboard is unavailable; try again shortly")


async def _guarded(handler: Handler, request: Request, gate: asyncio.Semaphore) -> Response | DashboardError:
    try:
        # The handler, not a streamed body, is what uses Redis: the gate keeps the requests in
        # progress below the connection pool, so a burst (every viewer reconnecting) waits, not fails.
        async with gate:
            return await handler(request)
    except DashboardError as error:
        return error
    except RequestValidationError as error:
        # FastAPI's own answer echoes each refused input, which fails to encode for a body
        # that is not UTF-8 or a string with a lone surrogate: the 422 became a 500.
        return Invalid([FieldError(loc=list(e["loc"]), msg=str(e["msg"]), type=str(e["type"])) for e in error.errors()])
    except (BusUnavailable, RedisError, OSError) as error:
        return _lost(error, request)


def api_route(gate: asyncio.Semaphore) -> type[APIRoute]:
    """The route class of the JSON API: ``{"detail": ...}`` with the error's status."""

    class ApiRoute(APIRoute):
        def get_route_handler(self) -> Handler:
            handler = super().get_route_handler()

            async def route(request: Request) -> Response:
                result = await _guarded(handler, request, gate)
                if isinstance(result, DashboardError):
                    result = JSONResponse({"detail": result.detail()}, status_code=result.status)
                for name, value in API_HEADERS.items():
                    result.headers.setdefault(name, value)
                return result

            return route

    return ApiRoute


def page_route(error_page: ErrorPage, gate: asyncio.Semaphore) -> type[APIRoute]:
    """The route class of HTML pages: not signed in sends to the sign-in page, other errors
    render ``error_page``; every page gets the security headers."""

    class PageRoute(APIRoute):
        def get_route_handler(self) -> Handler:
            handler = super().get_route_handler()

            async def route(request: Request) -> Response:
                result = await _guarded(handler, request, gate)
                if isinstance(result, NotSignedIn):
                    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                    result = RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)
                elif isinstance(result, DashboardError):
                    result = error_page(request, result)
                for name, value in PAGE_HEADERS.items():
                    result.headers.setdefault(name, value)
                return result

            return route

    return PageRoute
