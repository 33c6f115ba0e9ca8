"""The web UI: server-rendered pages over the same services as the API. Every page reads
without JavaScript; forms post back and redirect (or re-render with the field errors); the
thread page follows its run live through a small script and server-sent HTML fragments.
Each area's pages are a module here: threads, settings, review styles, dead letters."""

from fastapi import APIRouter, Response
from fastapi.responses import FileResponse, RedirectResponse

from services.dashboard.budgets import pages as budget_pages
from services.dashboard.context import Dashboard
from services.dashboard.errors import NotFound
from services.dashboard.pages import dead_letter_pages, review_style_pages, settings_pages, thread_pages
from services.dashboard.pages.common import PageKit
from services.dashboard.pages.rendering import STATIC, STATIC_TYPES, Pages
from services.dashboard.threads.service import Threads
from services.dashboard.usage import pages as usage_pages


def router(dashboard: Dashboard, pages: Pages, threads: Threads) -> APIRouter:
    site = APIRouter(route_class=dashboard.page_route(pages.error), include_in_schema=False)
    kit = PageKit(dashboard, pages)
    # The files are the package's own: looked up by name, a request's name never reaches the
    # file system (where a name too long for it was an error, not a 404).
    files = {path.name: path for path in STATIC.iterdir() if path.is_file() and path.suffix in STATIC_TYPES}

    @site.get("/")
    async def home() -> Response:
        return RedirectResponse("/threads", status_code=303)

    @site.get("/static/{name}")
    async def static(name: str) -> Response:
        path = files.get(name)
        if path is None:
            raise NotFound("no such file")
        return FileResponse(path, media_type=STATIC_TYPES[path.suffix], headers={"Cache-Control": "max-age=300"})

    @site.get("/favicon.ico")
    async def favicon() -> Response:
        return FileResponse(
            STATIC / "favicon.svg", media_type=STATIC_TYPES[".svg"], headers={"Cache-Control": "max-age=86400"}
        )

    thread_pages.routes(site, kit, threads)
    settings_pages.routes(site, kit)
    review_style_pages.routes(site, kit)
    dead_letter_pages.routes(site, kit)
    budget_pages.routes(site, kit, threads)
    usage_pages.routes(site, kit)
    return site
