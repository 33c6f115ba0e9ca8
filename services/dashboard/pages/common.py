"""What every page module shares: who is signed in, rendering, redirects with a notice, and
field errors of a form that failed validation."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from fastapi import Request, Response
from fastapi.responses import RedirectResponse

from services.dashboard.auth.guard import Principal
from services.dashboard.context import Dashboard
from services.dashboard.errors import Forbidden, Invalid
from services.dashboard.pages.rendering import Pages

EFFORTS = ["none", "minimal", "low", "medium", "high", "xhigh"]


@dataclass(frozen=True)
class PageKit:
    dashboard: Dashboard
    pages: Pages

    async def signed_in(self, request: Request) -> Principal:
        return await self.dashboard.guard.principal_of(request)

    async def administrator(self, request: Request) -> Principal:
        principal = await self.dashboard.guard.principal_of(request)
        if not principal.admin:
            raise Forbidden("this page is for Drydock administrators")
        return principal

    def render(
        self, request: Request, template: str, principal: Principal, status: int = 200, **context: Any
    ) -> Response:
        return self.pages.render(request, template, principal=principal, status=status, **context)


def back(path: str, notice: str) -> RedirectResponse:
    """Redirect after a form to ``path``, which shows ``notice``."""
    return RedirectResponse(f"{path}?notice={quote(notice)}", status_code=303)


def form_field(loc: Sequence[str | int]) -> str:
    """The form field an error's location names: its last named part (``("body", "allowed_organizations",
    0)`` is ``allowed_organizations``), and ``<role>_<field>`` for the team's per-role choices."""
    parts = [part for part in loc if isinstance(part, str) and part not in {"body", "query", "path"}]
    if len(parts) == 3 and parts[0] == "models":
        return f"{parts[1]}_{parts[2]}"
    return parts[-1] if parts else ""


def form_errors(invalid: Invalid) -> dict[str, str]:
    """An :class:`Invalid`'s messages by form field (the first one of each)."""
    found: dict[str, str] = {}
    for error in invalid.errors:
        found.setdefault(form_field(error.loc), error.msg)
    return found


def field_errors(error: ValueError) -> dict[str, str]:
    """A pydantic validation error's messages by form field."""
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return {"": str(error)}
    found: dict[str, str] = {}
    for detail in errors():
        found.setdefault(form_field(detail["loc"]), str(detail["msg"]).removeprefix("Value error, "))
    return found
