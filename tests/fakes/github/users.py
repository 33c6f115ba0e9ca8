"""The signed-in user's API, with a user access token (``Authorization: Bearer ghu_…``):
``GET /user``, ``GET /user/teams``, ``GET /user/memberships/orgs/{org}``,
``GET /user/installations`` and ``GET /user/installations/{installation_id}/repositories``,
paginated as GitHub paginates.

``/user/installations`` lists the installations of the token's own App that the user can reach a
repository of; a token not issued to a GitHub App is refused with 403, as GitHub does. A GitHub
App's user token sees the user's organization memberships only where that App is installed (a
user-to-server token is limited to the App's access); elsewhere, and for non-members, 404."""

from __future__ import annotations

import zlib
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from tests.fakes.github.activity import activity_of
from tests.fakes.github.app_tokens import installation_json, repository_json
from tests.fakes.github.auth import state
from tests.fakes.github.errors import GithubError, not_found
from tests.fakes.github.identity import User, identity_of
from tests.fakes.github.pagination import paginate
from tests.fakes.github.state import UserToken

router = APIRouter()

USER_DOCS = "https://docs.github.com/rest/users/users#get-the-authenticated-user"
MEMBERSHIP_DOCS = "https://docs.github.com/rest/orgs/members#get-an-organization-membership-for-the-authenticated-user"
INSTALLATIONS_DOCS = (
    "https://docs.github.com/rest/apps/installations#list-app-installations-accessible-to-the-user-access-token"
)


def user_token(request: Request) -> UserToken:
    """The request's user access token; 401 as GitHub answers otherwise, 403 for an installation token."""
    header = request.headers.get("authorization")
    if header is None:
        raise GithubError(401, "Requires authentication", USER_DOCS)
    scheme, _, credential = header.partition(" ")
    github = state(request)
    credential = credential.strip()
    if scheme.lower() not in {"bearer", "token"}:
        raise GithubError(401, "Bad credentials", USER_DOCS)
    if credential in github.tokens:
        raise GithubError(403, "Resource not accessible by integration", USER_DOCS)
    found = github.user_tokens.get(credential)
    if found is None:
        raise GithubError(401, "Bad credentials", USER_DOCS)
    return found


def _user(request: Request, token: UserToken) -> User:
    found = identity_of(state(request)).user(token.login)
    if found is None:
        found = User(token.user_id, token.login, repositories=token.repositories)
    return found


def user_json(user: User, base_url: str) -> dict[str, Any]:
    return {
        "login": user.login,
        "id": user.id,
        "node_id": f"U_{user.id}",
        "avatar_url": f"https://avatars.githubusercontent.com/u/{user.id}?v=4",
        "url": f"{base_url}/users/{user.login}",
        "html_url": f"https://github.com/{user.login}",
        "type": "User",
        "site_admin": False,
        "name": user.name or None,
        "email": user.email,
    }


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


@router.get("/user")
async def authenticated_user(request: Request, token: Annotated[UserToken, Depends(user_token)]) -> dict[str, Any]:
    return user_json(_user(request, token), _base(request))


@router.get("/user/teams")
async def user_teams(request: Request, token: Annotated[UserToken, Depends(user_token)]) -> JSONResponse:
    teams = [
        {
            "id": team.id,
            "node_id": f"T_{team.id}",
            "name": team.name,
            "slug": team.slug,
            "privacy": "closed",
            "permission": "pull",
            "organization": {"login": team.organization, "id": team.id + 1, "type": "Organization"},
        }
        for team in identity_of(state(request)).teams_of(token.login)
    ]
    page, headers = paginate(request, teams)
    return JSONResponse(page, headers=headers)


@router.get("/user/memberships/orgs/{org}")
async def organization_membership(
    org: str, request: Request, token: Annotated[UserToken, Depends(user_token)]
) -> dict[str, Any]:
    github, identity = state(request), identity_of(state(request))
    client = identity.clients.get(identity.token_clients.get(token.token, ""))
    if client is not None and not any(
        installation.app_id == client.app_id and installation.account.lower() == org.lower()
        for installation in github.installations.values()
    ):
        raise not_found(MEMBERSHIP_DOCS)
    if token.login.lower() not in activity_of(github).org_members.get(org.lower(), set()):
        raise not_found(MEMBERSHIP_DOCS)
    base = _base(request)
    return {
        "url": f"{base}/orgs/{org}/memberships/{token.login}",
        "state": "active",
        "role": "member",
        "organization_url": f"{base}/orgs/{org}",
        "organization": {"login": org, "id": zlib.crc32(org.lower().encode()), "url": f"{base}/orgs/{org}"},
        "user": user_json(_user(request, token), base),
    }


@router.get("/user/installations")
async def user_installations(request: Request, token: Annotated[UserToken, Depends(user_token)]) -> JSONResponse:
    github, identity = state(request), identity_of(state(request))
    if token.token not in identity.token_clients:
        raise GithubError(
            403,
            "You must authenticate with an access token authorized to a GitHub App in order to list installations",
            INSTALLATIONS_DOCS,
        )
    installations = identity.installations_for(token.token)
    page, headers = paginate(request, installations)
    body = {
        "total_count": len(installations),
        "installations": [
            installation_json(installation, _base(request), github.apps[installation.app_id]) for installation in page
        ],
    }
    return JSONResponse(body, headers=headers)


@router.get("/user/installations/{installation_id}/repositories")
async def user_installation_repositories(
    installation_id: int, request: Request, token: Annotated[UserToken, Depends(user_token)]
) -> JSONResponse:
    identity = identity_of(state(request))
    installation = next(
        (found for found in identity.installations_for(token.token) if found.id == installation_id), None
    )
    if installation is None:
        raise not_found(INSTALLATIONS_DOCS)
    repositories = identity.repositories_for(installation, _user(request, token))
    page, headers = paginate(request, repositories)
    body = {
        "total_count": len(repositories),
        "repository_selection": installation.repository_selection,
        "repositories": [repository_json(repo, _base(request)) for repo in page],
    }
    return JSONResponse(body, headers=headers)
