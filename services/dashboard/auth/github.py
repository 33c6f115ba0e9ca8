"""Signing in with GitHub: the OAuth web flow (authorization code, ``state`` and PKCE) of the
GitHub App's client (or an OAuth App), and what the dashboard reads with the person's token.

``github_web_url`` (default ``https://{DRYDOCK_GITHUB_HOST}``) is where browsers go to authorize,
and the token endpoint lives there too; the API is ``DRYDOCK_GITHUB_API_URL`` (GitHub Enterprise:
``https://HOST/api/v3``). Which repositories a person may see comes from the installations of
the App their token reaches (``/user/installations`` and each one's repositories), which is
what GitHub itself lets them see of the repositories Drydock works on. The code exchange goes to
the web host with httpx; what is read with the person's token goes through
:class:`~drydock.github.GithubClient`.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import urlencode

import httpx

from drydock.config import Settings
from drydock.errors import OutboundFailed, describe
from drydock.github import GithubClient
from services.dashboard.errors import BadGateway, Unavailable, github_failure

T = TypeVar("T")


class SignInRefused(Exception):
    """GitHub refused the code exchange (an expired or replayed code, a wrong verifier)."""


@dataclass(frozen=True)
class GithubToken:
    access_token: str
    expires_at: datetime | None


@dataclass(frozen=True)
class GithubUser:
    id: int
    login: str
    name: str
    avatar_url: str


class GithubSignIn:
    def __init__(self, settings: Settings, http: httpx.AsyncClient, api: GithubClient) -> None:
        dashboard = settings.dashboard
        assert dashboard.github_client_id is not None
        assert dashboard.github_client_secret is not None
        self._client_id = dashboard.github_client_id
        self._client_secret = dashboard.github_client_secret.get_secret_value()
        self._scopes = dashboard.github_scopes
        self.web_url = dashboard.github_web_url or f"https://{settings.github.host}"
        self.redirect_uri = f"{dashboard.public_url}/auth/github/callback"
        self._http = http
        self._api = api

    def authorize_url(self, state: str, code_challenge: str) -> str:
        query = {
            "client_id": self._client_id,
            "redirect_uri": self.redirect_uri,
            "scope": self._scopes,
            "state": state,
            "code_challenge": code_challenge,
            "code_challenge_method": "S256",
            "allow_signup": "false",
        }
        return f"{self.web_url}/login/oauth/authorize?{urlencode(query)}"

    async def exchange(self, code: str, code_verifier: str) -> GithubToken:
        """Trade the authorization code for the person's token; :class:`SignInRefused` when
        GitHub refuses it (GitHub answers such errors with 200 and an ``error`` field)."""
        try:
            response = await self._http.post(
                f"{self.web_url}/login/oauth/access_token",
                data={
                    "client_id": self._client_id,
                    "client_secret": self._client_secret,
                    "code": code,
                    "redirect_uri": self.redirect_uri,
                    "code_verifier": code_verifier,
                },
                headers={"Accept": "application/json"},
            )
        except httpx.HTTPError as error:
            raise Unavailable(f"GitHub cannot be reached to finish signing in: {describe(error)}") from None
        body = _json(response)
        if not response.is_success or not isinstance(body, dict):
            raise BadGateway(f"GitHub answered {response.status_code} to the token exchange")
        if "error" in body or not body.get("access_token"):
            raise SignInRefused(str(body.get("error_description") or body.get("error") or "no access token"))
        expires_in = body.get("expires_in")
        expires_at = datetime.now(UTC) + timedelta(seconds=int(expires_in)) if expires_in else None
        return GithubToken(str(body["access_token"]), expires_at)

    async def _asked(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except OutboundFailed as failure:
            raise github_failure(failure) from None

    async def user(self, token: str) -> GithubUser:
        body = await self._asked(self._api.user(f"Bearer {token}"))
        if "id" not in body or "login" not in body:
            raise BadGateway("GitHub's /user answer has no id and login")
        return GithubUser(
            int(body["id"]), str(body["login"]), str(body.get("name") or ""), str(body.get("avatar_url") or "")
        )

    async def teams(self, token: str) -> set[str]:
        """The person's teams as ``org/team-slug``, lower-cased."""
        teams = await self._asked(self._api.user_teams(f"Bearer {token}"))
        return {
            f"{team['organization']['login']}/{team['slug']}".lower()
            for team in teams
            if isinstance(team.get("organization"), dict) and team.get("slug")
        }

    async def is_member(self, token: str, org: str) -> bool:
        """Whether the person is an active member of ``org`` (``GET /user/memberships/orgs/{org}``:
        404 for a non-member, or where a GitHub App's user token does not reach, as the App is
        not installed there; a pending invitation is no membership)."""
        membership = await self._asked(self._api.user_org_membership(f"Bearer {token}", org))
        return membership is not None and membership.get("state") == "active"

    async def repositories(self, token: str) -> set[str]:
        """The repositories of the App's installations that the person may see, lower-cased."""
        found: set[str] = set()
        for installation in await self._asked(self._api.user_installations(f"Bearer {token}")):
            repositories = await self._asked(
                self._api.user_installation_repositories(f"Bearer {token}", int(installation["id"]))
            )
            found |= {str(repo["full_name"]).lower() for repo in repositories if repo.get("full_name")}
        return found


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
