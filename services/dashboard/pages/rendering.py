"""Server-rendered pages: Jinja2 templates (autoescaped) and the few static files they use,
shipped with the package (no CDN, no front-end build)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse

from services.dashboard.auth.guard import Principal
from services.dashboard.errors import DashboardError, Invalid
from services.dashboard.pages.markdown import markdown

HERE = Path(__file__).parent
STATIC = HERE / "static"
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml"}


def _when(value: datetime | str | None) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return str(value)
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value.tzinfo else value.isoformat(sep=" ")


def _with_typed(choices: list[str], typed: str | None) -> list[str]:
    """A select's choices, plus the value that was sent if it is none of them (so that a form
    shown again with an error keeps it, marked invalid)."""
    return [*choices, typed] if typed and typed not in choices else choices


class Pages:
    def __init__(self) -> None:
        self._env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=jinja2.select_autoescape(["html"]),
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self._env.filters["when"] = _when
        self._env.filters["markdown"] = markdown
        self._env.globals["with_typed"] = _with_typed

    def render(
        self,
        request: Request,
        template: str,
        *,
        principal: Principal | None = None,
        status: int = 200,
        **context: Any,
    ) -> HTMLResponse:
        body = self._env.get_template(template).render(
            request=request,
            principal=principal,
            csrf=principal.session.csrf if principal is not None else "",
            path=request.url.path,
            notice=request.query_params.get("notice", "")[:200],
            **context,
        )
        return HTMLResponse(body, status_code=status)

    def fragment(self, template: str, **context: Any) -> str:
        """A piece of a page (for the live event stream)."""
        return self._env.get_template(template).render(**context)

    def error(self, request: Request, error: DashboardError, principal: Principal | None = None) -> HTMLResponse:
        messages = list(error.by_field().values()) if isinstance(error, Invalid) else [error.message]
        return self.render(
            request, "error.html", principal=principal, status=error.status, title=_TITLES.get(error.status, "Error"),
            messages=messages,
        )  # fmt: skip


_TITLES = {
    400: "Bad request",
    401: "Sign in first",
    403: "Not allowed",
    404: "Not found",
    409: "Not now",
    405: "Not here",
    422: "Check your input",
    500: "Something went wrong",
    502: "GitHub answered with an error",
    503: "Try again shortly",
}
