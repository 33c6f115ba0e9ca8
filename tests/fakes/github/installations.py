"""An App's installations and their repositories: ``GET /app/installations`` (as the App, by
its JWT) and ``GET /installation/repositories`` (with an installation token), paginated."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from tests.fakes.github.app_tokens import installation_json, repository_json
from tests.fakes.github.auth import authenticated_app, installation_token, state
from tests.fakes.github.pagination import paginate
from tests.fakes.github.state import App, InstallationToken

router = APIRouter()


@router.get("/app/installations")
async def app_installations(request: Request, app: Annotated[App, Depends(authenticated_app)]) -> JSONResponse:
    github = state(request)
    installations = [found for found in github.installations.values() if found.app_id == app.id]
    page, headers = paginate(request, installations)
    base = str(request.base_url).rstrip("/")
    return JSONResponse([installation_json(found, base, app) for found in page], headers=headers)


@router.get("/installation/repositories")
async def installation_repositories(
    request: Request, token: Annotated[InstallationToken, Depends(installation_token)]
) -> JSONResponse:
    github = state(request)
    repositories = github.token_repositories(token)
    page, headers = paginate(request, repositories)
    installation = github.installations[token.installation_id]
    body = {
        "total_count": len(repositories),
        "repository_selection": "selected" if token.repositories is not None else installation.repository_selection,
        "repositories": [repository_json(repo, str(request.base_url).rstrip("/")) for repo in page],
    }
    return JSONResponse(body, headers=headers)
