"""Repositories: ``GET /repos/{owner}/{repo}``, authenticated by an installation token."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from tests.fakes.github.app_tokens import repository_json
from tests.fakes.github.auth import installation_token, state
from tests.fakes.github.errors import not_found
from tests.fakes.github.state import InstallationToken

router = APIRouter()

REPOSITORY_DOCS = "https://docs.github.com/rest/repos/repos#get-a-repository"


@router.get("/repos/{owner}/{repo}")
async def get_repository(
    owner: str, repo: str, request: Request, token: Annotated[InstallationToken, Depends(installation_token)]
) -> dict[str, Any]:
    github = state(request)
    full_name = f"{owner}/{repo}"
    if not github.token_allows(token.token, full_name, permission="metadata", level="read"):
        raise not_found(REPOSITORY_DOCS)
    found = github.repository(full_name)
    return repository_json(found, str(request.base_url).rstrip("/"))
