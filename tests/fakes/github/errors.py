"""GitHub's JSON error shape: ``{"message", "documentation_url", "status"}`` with the HTTP
status repeated as a string, as the REST API answers today."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse

DOCS = "https://docs.github.com/rest"


class GithubError(Exception):
    """Raised by a route; rendered as GitHub renders its errors."""

    def __init__(self, status: int, message: str, documentation_url: str = DOCS) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.documentation_url = documentation_url


def not_found(documentation_url: str = DOCS) -> GithubError:
    return GithubError(404, "Not Found", documentation_url)


async def render(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, GithubError)
    return JSONResponse(
        {"message": error.message, "documentation_url": error.documentation_url, "status": str(error.status)},
        status_code=error.status,
    )
