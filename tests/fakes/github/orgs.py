"""Organizations: ``GET /orgs/{org}/installation`` (as the App) and
``GET /orgs/{org}/members/{username}`` (as an installation with ``members: read``): 204 for a
member, 404 for anyone else, 302 to the public members list when the caller's installation is
not on that organization."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from tests.fakes.github.activity import activity_of
from tests.fakes.github.app_tokens import installation_json
from tests.fakes.github.auth import authenticated_app, installation_token, state
from tests.fakes.github.errors import GithubError, not_found
from tests.fakes.github.state import App, InstallationToken

router = APIRouter()

INSTALLATION_DOCS = "https://docs.github.com/rest/apps/apps#get-an-organization-installation-for-the-authenticated-app"
MEMBERS_DOCS = "https://docs.github.com/rest/orgs/members#check-organization-membership-for-a-user"


@router.get("/orgs/{org}/installation")
async def organization_installation(
    org: str, request: Request, app: Annotated[App, Depends(authenticated_app)]
) -> dict[str, Any]:
    for installation in state(request).installations.values():
        if installation.app_id == app.id and installation.account.lower() == org.lower():
            return installation_json(installation, str(request.base_url).rstrip("/"), app)
    raise not_found(INSTALLATION_DOCS)


@router.get("/orgs/{org}/members/{username}")
async def check_membership(
    org: str, username: str, request: Request, token: Annotated[InstallationToken, Depends(installation_token)]
) -> Response:
    installation = state(request).installations[token.installation_id]
    if installation.account.lower() != org.lower():
        return Response(status_code=302, headers={"Location": f"/orgs/{org}/public_members/{username}"})
    if token.permissions.get("members") not in {"read", "write"}:
        raise GithubError(403, "Resource not accessible by integration", MEMBERS_DOCS)
    if username.lower() in activity_of(state(request)).org_members.get(org.lower(), set()):
        return Response(status_code=204)
    raise GithubError(404, "User does not exist or is not a member of the organization", MEMBERS_DOCS)
