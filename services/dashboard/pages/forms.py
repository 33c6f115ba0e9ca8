"""Reading the dashboard's HTML forms: the CSRF field checked, text fields and checkboxes."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request
from starlette.datastructures import FormData

from services.dashboard.auth.guard import CSRF_FIELD, Guard, Principal


@dataclass(frozen=True)
class Form:
    data: FormData

    def text(self, name: str, default: str = "") -> str:
        value = self.data.get(name)
        return value if isinstance(value, str) else default

    def optional(self, name: str) -> str | None:
        return self.text(name).strip() or None

    def checked(self, name: str) -> bool:
        """A checkbox: sent (with any value) when ticked."""
        return name in self.data

    def all(self, name: str) -> list[str]:
        return [value for value in self.data.getlist(name) if isinstance(value, str)]


async def read_form(request: Request, guard: Guard, principal: Principal) -> Form:
    """The request's form, after checking its CSRF field and origin (403 otherwise)."""
    data = await request.form(max_files=0, max_fields=500)
    form = Form(data)
    guard.check_write(request, principal, form.text(CSRF_FIELD) or None)
    return form
