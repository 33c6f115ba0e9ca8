"""Repositories: ``GET /repos/{owner}/{repo}``, as the App (installation token) or a user (OAuth
token). Tests set a repository's ``default_branch`` on :meth:`GithubState.repository`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from tests.fakes.github.actors import Actor, acting
from tests.fakes.github.app_tokens import repository_json
from tests.fakes.github.auth import state
from tests.fakes.github.errors import not_found

router = APIRouter()

REPOSITORY_DOCS = "https://docs.github.com/rest/repos/repos#get-a-repository"


@router.get("/repos/{owner}/{repo}")
async def get_repository(
    owner: str, repo: str, request: Request, actor: Annotated[Actor, Depends(acting)]
) -> dict[str, Any]:
    github = state(request)
    full_name = f"{owner}/{repo}"
    if not actor.allows(github, full_name, "metadata", "read"):
        raise not_found(REPOSITORY_DOCS)
    found = github.repository(full_name)
    return repository_json(found, str(request.base_url).rstrip("/"))
