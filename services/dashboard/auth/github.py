"""Signing in with GitHub: the OAuth web flow (authorization code, ``state`` and PKCE) of the
GitHub App's client (or an OAuth App), and what the dashboard reads with the person's token.

``github_web_url`` (default ``https://{DRYDOCK_GITHUB_HOST}``) is where browsers go to authorize,
and the token endpoint lives there too; the API is ``DRYDOCK_GITHUB_API_URL`` (GitHub Enterprise:
``https://HOST/api/v3``). Which repositories a person may see comes from the installations of
the App their token reaches (``/user/installations`` and each one's repositories), which is
what GitHub itself lets them see of the repositories Drydock works on.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, urlencode

import httpx

from drydock.config import Settings
from drydock.errors import describe
from services.dashboard.errors import BadGateway, Unavailable

API_VERSION = "2022-11-28"
MAX_PAGES = 20
"""Pages of 100 read per listing at most (2,000 installations or repositories)."""


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
    def __init__(self, settings: Settings, http: httpx.AsyncClient) -> None:
        dashboard = settings.dashboard
        assert dashboard.github_client_id is not None
        assert dashboard.github_client_secret is not None
        self._client_id = dashboard.github_client_id
        self._client_secret = dashboard.github_client_secret.get_secret_value()
        self._scopes = dashboard.github_scopes
        self.web_url = dashboard.github_web_url or f"https://{settings.github.host}"
        self._api_url = settings.github.api_url.rstrip("/")
        self.redirect_uri = f"{dashboard.public_url}/auth/github/callback"
        self._http = http

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

    @staticmethod
    def _headers(token: str) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
        }

    async def _get(self, token: str, path: str, params: dict[str, str] | None = None) -> httpx.Response:
        try:
            response = await self._http.get(
                f"{self._api_url}{path}" if path.startswith("/") else path, params=params, headers=self._headers(token)
            )
        except httpx.HTTPError as error:
            raise Unavailable(f"GitHub cannot be reached: {describe(error)}") from None
        if not response.is_success:
            raise BadGateway(f"GitHub answered {response.status_code} to GET {path}")
        return response

    async def user(self, token: str) -> GithubUser:
        body = _json(await self._get(token, "/user"))
        if not isinstance(body, dict) or "id" not in body or "login" not in body:
            raise BadGateway("GitHub's /user answer has no id and login")
        return GithubUser(
            int(body["id"]), str(body["login"]), str(body.get("name") or ""), str(body.get("avatar_url") or "")
        )

    async def teams(self, token: str) -> set[str]:
        """The person's teams as ``org/team-slug``, lower-cased."""
        teams = await self._pages(token, "/user/teams", None)
        return {
            f"{team['organization']['login']}/{team['slug']}".lower()
            for team in teams
            if isinstance(team.get("organization"), dict) and team.get("slug")
        }

    async def is_member(self, token: str, org: str) -> bool:
        """Whether the person is an active member of ``org`` (``GET /user/memberships/orgs/{org}``:
        404 for a non-member, or where a GitHub App's user token does not reach, as the App is
        not installed there; a pending invitation is no membership)."""
        path = f"/user/memberships/orgs/{quote(org, safe='')}"
        try:
            response = await self._http.get(f"{self._api_url}{path}", headers=self._headers(token))
        except httpx.HTTPError as error:
            raise Unavailable(f"GitHub cannot be reached: {describe(error)}") from None
        if response.status_code in {403, 404}:
            return False
        if not response.is_success:
            raise BadGateway(f"GitHub answered {response.status_code} to GET {path}")
        body = _json(response)
        return isinstance(body, dict) and body.get("state") == "active"

    async def repositories(self, token: str) -> set[str]:
        """The repositories of the App's installations that the person may see, lower-cased."""
        found: set[str] = set()
        for installation in await self._pages(token, "/user/installations", "installations"):
            repositories = await self._pages(
                token, f"/user/installations/{installation['id']}/repositories", "repositories"
            )
            found |= {str(repo["full_name"]).lower() for repo in repositories if repo.get("full_name")}
        return found

    async def _pages(self, token: str, path: str, field: str | None) -> list[dict[str, Any]]:
        """Every item of a paginated listing (``field`` names the array in an object answer)."""
        items: list[dict[str, Any]] = []
        url: str | None = path
        params: dict[str, str] | None = {"per_page": "100"}
        for _ in range(MAX_PAGES):
            if url is None:
                break
            response = await self._get(token, url, params)
            body = _json(response)
            page = body.get(field) if field is not None and isinstance(body, dict) else body
            items += [item for item in page if isinstance(item, dict)] if isinstance(page, list) else []
            url, params = response.links.get("next", {}).get("url"), None
        return items


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
