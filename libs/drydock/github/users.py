"""Users and organizations: membership as the App's installation sees it, and what a person's
own token tells about them (signing in to the dashboard)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from drydock.github.installations import Installations
from drydock.github.responses import checked

LIMIT = 2000
"""Items read per listing at most (installations, repositories, teams)."""


class Users(Installations):
    async def is_org_member(self, installation_id: int, org: str, login: str) -> bool:
        """Whether ``login`` belongs to ``org`` (public or private membership, as the App sees it)."""
        response = await self.as_installation(installation_id, None, "GET", f"/orgs/{org}/members/{login}")
        if response.status_code == 204:
            return True
        if response.status_code in {302, 404}:
            return False
        checked(response, f"checking {login}'s membership of {org}")
        return False

    async def user(self, authorization: str) -> dict[str, Any]:
        """The person the authorization belongs to (``id``, ``login``, ``name``, ``avatar_url``)."""
        return checked(await self.send(self.as_caller(authorization), "GET", "/user"), "reading the signed-in user")

    async def user_teams(self, authorization: str) -> list[dict[str, Any]]:
        """The person's teams (``slug``, ``organization.login``)."""
        return await self.listed(authorization, "/user/teams", "listing the user's teams", limit=LIMIT)

    async def user_org_membership(self, authorization: str, org: str) -> dict[str, Any] | None:
        """The person's membership of ``org`` (``state``, ``role``); ``None`` for a non-member, or
        where a GitHub App's user token does not reach (GitHub answers 404 or 403)."""
        path = f"/user/memberships/orgs/{quote(org, safe='')}"
        response = await self.send(self.as_caller(authorization), "GET", path)
        if response.status_code in {403, 404}:
            return None
        return checked(response, f"reading the user's membership of {org}")

    async def user_installations(self, authorization: str) -> list[dict[str, Any]]:
        """The App's installations the person's token reaches."""
        doing = "listing the user's installations"
        return await self.listed(authorization, "/user/installations", doing, limit=LIMIT, field="installations")

    async def user_installation_repositories(self, authorization: str, installation_id: int) -> list[dict[str, Any]]:
        """The repositories of an installation that the person may see."""
        path = f"/user/installations/{installation_id}/repositories"
        doing = f"listing the user's repositories of installation {installation_id}"
        return await self.listed(authorization, path, doing, limit=LIMIT, field="repositories")
