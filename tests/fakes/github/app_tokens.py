"""GitHub App installation tokens: ``GET /repos/{owner}/{repo}/installation`` and
``POST /app/installations/{installation_id}/access_tokens``, both authenticated by the App's
JWT, with GitHub's response shapes and status codes."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import JSONResponse

from tests.fakes.github.auth import authenticated_app, state
from tests.fakes.github.errors import GithubError, not_found
from tests.fakes.github.state import App, Installation, InstallationToken, Repository, permission_allows

router = APIRouter()

INSTALLATION_DOCS = "https://docs.github.com/rest/apps/apps#get-a-repository-installation-for-the-authenticated-app"
TOKEN_DOCS = "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app"


def _timestamp(value: Any) -> str:
    return str(value.strftime("%Y-%m-%dT%H:%M:%SZ"))


def _account(installation: Installation) -> dict[str, Any]:
    return {
        "login": installation.account,
        "id": installation.account_id,
        "type": installation.account_type,
        "site_admin": False,
    }


def repository_json(repo: Repository, base_url: str) -> dict[str, Any]:
    """A repository in the shape of GitHub's ``repository`` object (the fields clients read)."""
    return {
        "id": repo.id,
        "node_id": f"R_{repo.id}",
        "name": repo.name,
        "full_name": repo.full_name,
        "private": repo.private,
        "owner": {"login": repo.owner, "type": "Organization"},
        "url": f"{base_url}/repos/{repo.full_name}",
        "default_branch": repo.default_branch,
    }


def installation_json(installation: Installation, base_url: str, app: App) -> dict[str, Any]:
    return {
        "id": installation.id,
        "account": _account(installation),
        "repository_selection": installation.repository_selection,
        "access_tokens_url": f"{base_url}/app/installations/{installation.id}/access_tokens",
        "repositories_url": f"{base_url}/installation/repositories",
        "html_url": f"https://github.com/organizations/{installation.account}/settings/installations/{installation.id}",
        "app_id": app.id,
        "app_slug": app.slug,
        "target_id": installation.account_id,
        "target_type": installation.account_type,
        "permissions": installation.permissions,
        "events": installation.events,
        "created_at": _timestamp(installation.created_at),
        "updated_at": _timestamp(installation.created_at),
        "single_file_name": None,
        "has_multiple_single_files": False,
        "single_file_paths": [],
        "suspended_by": None,
        "suspended_at": None,
    }


def _base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


@router.get("/repos/{owner}/{repo}/installation")
async def repository_installation(
    owner: str, repo: str, request: Request, app: Annotated[App, Depends(authenticated_app)]
) -> dict[str, Any]:
    installation = state(request).installation_for(app.id, f"{owner}/{repo}")
    if installation is None:
        raise not_found(INSTALLATION_DOCS)
    return installation_json(installation, _base_url(request), app)


def _scope(available: list[Repository], names: list[str] | None, ids: list[int] | None) -> list[Repository] | None:
    if names is None and ids is None:
        return None
    by_name = {repo.name.lower(): repo for repo in available}
    by_id = {repo.id: repo for repo in available}
    chosen: dict[int, Repository] = {}
    for name in names or []:
        if name.lower() not in by_name:
            raise _inaccessible()
        chosen[by_name[name.lower()].id] = by_name[name.lower()]
    for repo_id in ids or []:
        if repo_id not in by_id:
            raise _inaccessible()
        chosen[repo_id] = by_id[repo_id]
    return list(chosen.values())


def _inaccessible() -> GithubError:
    return GithubError(
        422,
        "There is at least one repository that does not exist or is not accessible to the parent installation.",
        TOKEN_DOCS,
    )


def _token_json(token: InstallationToken, selection: str, base_url: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "token": token.token,
        "expires_at": _timestamp(token.expires_at),
        "permissions": token.permissions,
        "repository_selection": selection,
    }
    if token.repositories is not None:
        body["repositories"] = [repository_json(repo, base_url) for repo in token.repositories]
    return body


@router.post("/app/installations/{installation_id}/access_tokens")
async def create_access_token(
    installation_id: int,
    request: Request,
    app: Annotated[App, Depends(authenticated_app)],
    body: Annotated[dict[str, Any] | None, Body()] = None,
) -> JSONResponse:
    github = state(request)
    installation = github.installations.get(installation_id)
    if installation is None or installation.app_id != app.id:
        raise not_found(TOKEN_DOCS)
    request_body = body or {}
    names, ids, permissions = (
        request_body.get("repositories"),
        request_body.get("repository_ids"),
        request_body.get("permissions"),
    )
    if (names is not None and not isinstance(names, list)) or (ids is not None and not isinstance(ids, list)):
        raise GithubError(422, "Invalid request.\n\nFor 'properties/repositories', is not an array.", TOKEN_DOCS)
    if permissions is not None and not isinstance(permissions, dict):
        raise GithubError(422, "Invalid request.\n\nFor 'properties/permissions', is not an object.", TOKEN_DOCS)
    repositories = _scope(github.installation_repositories(installation), names, ids)
    if permissions is None:
        granted = dict(installation.permissions)
    else:
        for name, level in permissions.items():
            if level not in {"read", "write", "admin"} or not permission_allows(
                installation.permissions.get(name), level
            ):
                raise GithubError(422, "The permissions requested are not granted to this installation.", TOKEN_DOCS)
        granted = dict(permissions)
    selection = "selected" if repositories is not None else installation.repository_selection
    token = github.issue_token(installation, granted, repositories)
    return JSONResponse(_token_json(token, selection, _base_url(request)), status_code=201)
