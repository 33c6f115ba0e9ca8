"""The errors a dashboard service raises, each with its HTTP status; the route classes of
:mod:`services.dashboard.routing` render them as JSON for the API and as pages for the UI.

Validation errors have FastAPI's shape (``detail`` is a list of ``{loc, msg, type}``), so a
client reads a 422 the same whether the request's schema or a service check refused it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from drydock.errors import OutboundFailed


class DashboardError(Exception):
    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def detail(self) -> Any:
        return self.message

    @classmethod
    def of(cls, status: int, message: str) -> DashboardError:
        """An error with any status (for the page of an error that came from elsewhere)."""
        error = cls(message)
        error.status = status
        return error


class NotSignedIn(DashboardError):
    status = 401


class Forbidden(DashboardError):
    status = 403


class NotFound(DashboardError):
    status = 404


class Conflict(DashboardError):
    status = 409


class Unavailable(DashboardError):
    """NATS, Redis or the code host did not answer: try again."""

    status = 503


class BadGateway(DashboardError):
    """The code host or the identity provider answered with an error."""

    status = 502


def github_failure(failure: OutboundFailed) -> DashboardError:
    """A call to GitHub that failed: 503 when GitHub could not be reached, 502 when it refused."""
    if failure.status is None:
        return Unavailable(f"GitHub cannot be reached: {failure.reason}")
    return BadGateway(failure.reason)


class FieldError(BaseModel):
    loc: list[str | int]
    msg: str
    type: str = "value_error"


class Invalid(DashboardError):
    """422: what is wrong with which field."""

    status = 422

    def __init__(self, errors: Sequence[FieldError]) -> None:
        super().__init__("; ".join(f"{'.'.join(map(str, error.loc[1:]))}: {error.msg}" for error in errors))
        self.errors = list(errors)

    @classmethod
    def field(cls, loc: Sequence[str | int], message: str) -> Invalid:
        return cls([FieldError(loc=list(loc), msg=message)])

    @classmethod
    def from_validation(cls, error: ValidationError, *, prefix: Sequence[str | int] = ("body",)) -> Invalid:
        return cls(
            [
                FieldError(loc=[*prefix, *detail["loc"]], msg=_message(detail["msg"]), type=detail["type"])
                for detail in error.errors()
            ]
        )

    def detail(self) -> Any:
        return [error.model_dump() for error in self.errors]

    def by_field(self) -> dict[str, str]:
        """Messages by field name (the last part of each location), for forms."""
        return {str(error.loc[-1]) if len(error.loc) > 1 else "": error.msg for error in self.errors}


def _message(text: str) -> str:
    return text.removeprefix("Value error, ")


class ErrorBody(BaseModel):
    """An error answer: a message, or for 422 the field errors."""

    detail: str | list[FieldError]


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "Not signed in."},
    403: {"model": ErrorBody, "description": "Signed in, but not allowed (or a missing CSRF token)."},
}
"""The answers every authenticated endpoint may give, for the OpenAPI document."""


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of an endpoint that may answer ``statuses`` besides 401 and 403."""
    descriptions = {
        404: "Not found.",
        409: "Conflicts with the current state.",
        422: "Invalid input: the field errors.",
        502: "The code host answered with an error.",
        503: "A dependency (NATS, Redis, the code host) is unavailable; try again.",
    }
    return ERROR_RESPONSES | {status: {"model": ErrorBody, "description": descriptions[status]} for status in statuses}
