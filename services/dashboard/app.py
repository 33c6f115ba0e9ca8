"""The dashboard's wiring: its one router (mounted by the web-only process too) and the
standalone service (``drydock serve dashboard``)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from fastapi import APIRouter, Request, Response

from drydock.http import ErrorPage, SiteRouter, create_app, serve
from drydock.infra.collector import freeze_startup_objects
from drydock.runtime import Runtime
from services.dashboard import api_docs
from services.dashboard.auth import endpoints as auth
from services.dashboard.budgets import endpoints as budgets
from services.dashboard.context import Dashboard
from services.dashboard.dead_letters import endpoints as dead_letters
from services.dashboard.errors import DashboardError
from services.dashboard.pages import endpoints as pages
from services.dashboard.pages.rendering import Pages
from services.dashboard.profiles import endpoints as profiles
from services.dashboard.repositories import endpoints as repositories
from services.dashboard.review_styles import endpoints as review_styles
from services.dashboard.routing import PAGE_HEADERS
from services.dashboard.team import endpoints as team
from services.dashboard.threads import endpoints as threads
from services.dashboard.threads.service import Threads
from services.dashboard.usage import endpoints as usage


def build(dashboard: Dashboard) -> APIRouter:
    """Every dashboard route on one router: the pages, sign-in, and the API under ``/api/v1``."""
    rendering = Pages()
    thread_service = Threads(dashboard)
    combined = SiteRouter(error_page(dashboard, rendering))
    for part in (
        *auth.routers(dashboard, rendering),
        profiles.router(dashboard),
        team.router(dashboard),
        dead_letters.router(dashboard),
        repositories.router(dashboard),
        review_styles.router(dashboard),
        threads.router(dashboard, thread_service),
        budgets.router(dashboard, thread_service),
        usage.router(dashboard),
        pages.router(dashboard, rendering, thread_service),
        api_docs.router(dashboard),
    ):
        combined.include_router(part)
    return combined


def error_page(dashboard: Dashboard, rendering: Pages) -> ErrorPage:
    """The HTML page of an error no page route answered (an unknown page, an unexpected error),
    with the navigation of whoever is signed in."""

    async def render(request: Request, status: int, detail: str) -> Response:
        try:
            principal = await dashboard.guard.principal_of(request)
        except Exception:  # not signed in, or the store is what failed: the page still answers
            principal = None
        message = {
            404: f"There is no page at {request.url.path}.",
            405: f"{request.url.path} does not answer {request.method}.",
        }.get(status, detail)
        response = rendering.error(request, DashboardError.of(status, message), principal)
        for name, value in PAGE_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    return render


@contextlib.asynccontextmanager
async def router(runtime: Runtime) -> AsyncIterator[APIRouter]:
    """The dashboard's router factory (mounted by ``services.web.app``): the dashboard on
    ``runtime``, its clients closed when the app stops."""
    dashboard = Dashboard.from_runtime(runtime)
    try:
        routes = build(dashboard)
        freeze_startup_objects()
        yield routes
    finally:
        await dashboard.aclose()


async def run(runtime: Runtime) -> None:
    """Serve the dashboard alone (health, readiness, metrics, pages and API) until cancelled."""
    await serve(create_app("dashboard", runtime, [router]), runtime.settings.http)


def listens(runtime: Runtime) -> str:
    http = runtime.settings.http
    return f"http://{http.host}:{http.port}/ (pages) and /api/v1 (API)"
