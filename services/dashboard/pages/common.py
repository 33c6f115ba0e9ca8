"""What every page module shares: who is signed in, rendering, redirects with a notice, and
field errors of a form that failed validation."""

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from fastapi import Request, Response
from fastapi.responses import RedirectResponse

from services.dashboard.auth.guard import Principal
from services.dashboard.context import Dashboard
from services.dashboard.errors import Forbidden
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


def field_errors(error: ValueError) -> dict[str, str]:
    """A pydantic validation error's messages by field name, for a form."""
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return {"": str(error)}
    return {str(detail["loc"][-1]) if detail["loc"] else "": str(detail["msg"]) for detail in errors()}
