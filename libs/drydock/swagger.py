"""The OpenAPI page (Swagger UI) from the files the ``fastapi-offline`` package ships, so that
``/docs`` works without a CDN (offline, and under a ``script-src 'self'`` policy: the page has no
inline script; a small script of ours starts Swagger UI with the document's URL)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

import fastapi_offline
from fastapi import APIRouter, Depends
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.routing import APIRoute

ASSETS = Path(fastapi_offline.__file__).parent / "static"
ASSETS_PATH = "/docs/assets"
FILES = {"swagger-ui-bundle.js": "text/javascript; charset=utf-8", "swagger-ui.css": "text/css; charset=utf-8"}
START = """\
window.addEventListener("load", function () {
  var root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.getAttribute("data-openapi"),
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    validatorUrl: null,
  });
});
"""


def page(openapi_url: str, title: str) -> HTMLResponse:
    """The Swagger UI page for the document at ``openapi_url``."""
    return HTMLResponse(
        f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title>
<link rel="icon" href="/favicon.ico">
<link rel="stylesheet" href="{ASSETS_PATH}/swagger-ui.css">
</head>
<body>
<p style="margin:8px 16px;font:14px system-ui,sans-serif"><a href="/threads">Drydock dashboard</a></p>
<div id="swagger-ui" data-openapi="{escape(openapi_url)}"></div>
<script src="{ASSETS_PATH}/swagger-ui-bundle.js"></script>
<script src="{ASSETS_PATH}/start.js"></script>
</body>
</html>
""",
        headers={"Cache-Control": "no-store"},
    )


def router(
    openapi_url: str, title: str, dependencies: Sequence[Any] = (), route_class: type[APIRoute] = APIRoute
) -> APIRouter:
    """``/docs`` and its assets (``dependencies`` guard the page, e.g. the dashboard's sign-in)."""
    docs = APIRouter(include_in_schema=False, route_class=route_class)

    @docs.get("/docs", dependencies=[Depends(dependency) for dependency in dependencies])
    async def swagger() -> HTMLResponse:
        return page(openapi_url, title)

    @docs.get(f"{ASSETS_PATH}/{{name}}")
    async def asset(name: str) -> Response:
        if name == "start.js":
            return Response(START, media_type="text/javascript; charset=utf-8", headers=_CACHED)
        if name not in FILES:
            return Response("no such file", status_code=404, media_type="text/plain")
        return FileResponse(ASSETS / name, media_type=FILES[name], headers=_CACHED)

    return docs


_CACHED = {"Cache-Control": "max-age=3600", "X-Content-Type-Options": "nosniff"}
