"""The GitHub REST API as the Drydock App: comments, reactions, check runs, org membership.

Authentication: the App signs a JWT (:mod:`drydock.credentials.app_jwt`) to mint installation
tokens, which are cached per installation until ``token_refresh_margin`` before they expire;
a 401 drops the cached token and retries once. ``api_url`` is ``https://api.github.com`` or a
GitHub Enterprise Server's ``https://HOST/api/v3``. One HTTP connection pool per client.

(``githubkit`` 0.16 cannot be imported next to ``hishel`` 2.0, the version locked today, so
this client speaks REST over ``httpx`` directly.)
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any, Literal

import httpx

from drydock.channels.errors import ChannelNotConfigured, OutboundFailed
from drydock.config import GithubSettings
from drydock.credentials.app_jwt import AppBearer

API_VERSION = "2022-11-28"
USER_AGENT = "drydock"

ReactionTarget = Literal["issue_comment", "review_comment", "issue"]
REACTIONS = frozenset({"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"})


class GithubClient:
    def __init__(self, settings: GithubSettings, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        if settings.app_id is None or settings.private_key is None:
            raise ChannelNotConfigured("GitHub App not configured: set DRYDOCK_GITHUB_APP_ID and _PRIVATE_KEY")
        self._app = AppBearer(settings.app_id, settings.private_key.get_secret_value())
        self._margin = settings.token_refresh_margin.total_seconds()
        self._api_url = settings.api_url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self._api_url,
            timeout=settings.request_timeout,
            transport=transport,
            headers={
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": USER_AGENT,
            },
        )
        self._tokens: dict[int, tuple[str, float]] = {}
        self._minting: dict[int, asyncio.Lock] = {}
        self._installations: dict[str, int] = {}
        """Installation ids by ``owner/name`` or ``org:name``; an optimization, they rarely change."""

    async def aclose(self) -> None:
        await self._http.aclose()

    # Authentication

    async def _send(self, method: str, path: str, authorization: str, json: Any = None) -> httpx.Response:
        try:
            return await self._http.request(method, path, json=json, headers={"Authorization": authorization})
        except httpx.HTTPError as error:
            raise OutboundFailed(f"GitHub at {self._api_url} unreachable: {error or type(error).__name__}") from None

    async def _as_app(self, method: str, path: str, json: Any = None) -> httpx.Response:
        return await self._send(method, path, self._app.header(), json)

    async def installation_token(self, installation_id: int) -> str:
        """A cached installation token, minted anew shortly before the old one expires."""
        cached = self._tokens.get(installation_id)
        if cached is not None and cached[1] - time.time() > self._margin:
            return cached[0]
        lock = self._minting.setdefault(installation_id, asyncio.Lock())
        async with lock:
            cached = self._tokens.get(installation_id)
            if cached is not None and cached[1] - time.time() > self._margin:
                return cached[0]
            response = await self._as_app("POST", f"/app/installations/{installation_id}/access_tokens")
            body = _checked(response, f"minting a token for installation {installation_id}")
            expires = datetime.fromisoformat(str(body["expires_at"]).replace("Z", "+00:00")).timestamp()
            self._tokens[installation_id] = (str(body["token"]), expires)
            return str(body["token"])

    async def installation_for(self, full_name: str) -> int:
        """The App's installation on ``owner/name`` (cached: it rarely changes)."""
        found = self._installations.get(full_name.lower())
        if found is not None:
            return found
        response = await self._as_app("GET", f"/repos/{full_name}/installation")
        installation_id = int(_checked(response, f"looking up the App's installation on {full_name}")["id"])
        self._installations[full_name.lower()] = installation_id
        return installation_id

    async def org_installation(self, org: str) -> int | None:
        """The App's installation on an organization; ``None`` if it is not installed there."""
        found = self._installations.get(f"org:{org.lower()}")
        if found is not None:
            return found
        response = await self._as_app("GET", f"/orgs/{org}/installation")
        if response.status_code == 404:
            return None
        installation_id = int(_checked(response, f"looking up the App's installation on {org}")["id"])
        self._installations[f"org:{org.lower()}"] = installation_id
        return installation_id

    async def _as_installation(
        self, installation_id: int | None, full_name: str | None, method: str, path: str, json: Any = None
    ) -> httpx.Response:
        if installation_id is None:
            if full_name is None:
                raise ValueError("an installation id or a repository is required")
            installation_id = await self.installation_for(full_name)
        response = await self._send(method, path, f"token {await self.installation_token(installation_id)}", json)
        if response.status_code == 401:
            self._tokens.pop(installation_id, None)
            response = await self._send(method, path, f"token {await self.installation_token(installation_id)}", json)
        return response

    # Conversation

    async def create_comment(self, installation_id: int | None, full_name: str, number: int, body: str) -> int:
        """Comment on an issue or pull request; returns the comment id."""
        response = await self._as_installation(
            installation_id, full_name, "POST", f"/repos/{full_name}/issues/{number}/comments", {"body": body}
        )
        return int(_checked(response, f"commenting on {full_name}#{number}")["id"])

    async def reply_to_review_comment(
        self, installation_id: int | None, full_name: str, number: int, comment_id: int, body: str
    ) -> int:
        """Reply in a pull request review comment's thread; returns the comment id."""
        path = f"/repos/{full_name}/pulls/{number}/comments/{comment_id}/replies"
        response = await self._as_installation(installation_id, full_name, "POST", path, {"body": body})
        return int(_checked(response, f"replying to review comment {comment_id} on {full_name}#{number}")["id"])

    async def react(
        self, installation_id: int | None, full_name: str, target: ReactionTarget, target_id: int, content: str = "eyes"
    ) -> None:
        """Add a reaction (idempotent: GitHub answers 200 when it already exists)."""
        if content not in REACTIONS:
            raise ValueError(f"{content!r} is not a GitHub reaction")
        paths = {
            "issue_comment": f"/repos/{full_name}/issues/comments/{target_id}/reactions",
            "review_comment": f"/repos/{full_name}/pulls/comments/{target_id}/reactions",
            "issue": f"/repos/{full_name}/issues/{target_id}/reactions",
        }
        response = await self._as_installation(installation_id, full_name, "POST", paths[target], {"content": content})
        _checked(response, f"reacting to {target} {target_id} on {full_name}")

    # Checks

    async def create_check_run(
        self,
        installation_id: int | None,
        full_name: str,
        *,
        name: str,
        head_sha: str,
        status: str,
        conclusion: str | None = None,
        title: str = "",
        summary: str = "",
        details_url: str | None = None,
    ) -> int:
        """Create a check run on ``head_sha``; returns its id."""
        request: dict[str, Any] = {"name": name, "head_sha": head_sha, "status": status}
        if conclusion is not None:
            request["conclusion"] = conclusion
        if title:
            request["output"] = {"title": title, "summary": summary or title}
        if details_url:
            request["details_url"] = details_url
        response = await self._as_installation(
            installation_id, full_name, "POST", f"/repos/{full_name}/check-runs", request
        )
        return int(_checked(response, f"creating check run {name!r} on {full_name}")["id"])

    async def update_check_run(
        self,
        installation_id: int | None,
        full_name: str,
        check_run_id: int,
        *,
        status: str,
        conclusion: str | None = None,
        title: str = "",
        summary: str = "",
    ) -> None:
        request: dict[str, Any] = {"status": status}
        if conclusion is not None:
            request["conclusion"] = conclusion
        if title:
            request["output"] = {"title": title, "summary": summary or title}
        response = await self._as_installation(
            installation_id, full_name, "PATCH", f"/repos/{full_name}/check-runs/{check_run_id}", request
        )
        _checked(response, f"updating check run {check_run_id} on {full_name}")

    # Organizations

    async def is_org_member(self, installation_id: int, org: str, login: str) -> bool:
        """Whether ``login`` belongs to ``org`` (public or private membership, as the App sees it)."""
        response = await self._as_installation(installation_id, None, "GET", f"/orgs/{org}/members/{login}")
        if response.status_code == 204:
            return True
        if response.status_code in {302, 404}:
            return False
        _checked(response, f"checking {login}'s membership of {org}")
        return False


def _checked(response: httpx.Response, doing: str) -> dict[str, Any]:
    """The JSON object of a successful response; :class:`OutboundFailed` with GitHub's message otherwise."""
    try:
        body = response.json() if response.content else {}
    except ValueError:
        body = None
    if response.is_success and isinstance(body, dict):
        return body
    message = body.get("message") if isinstance(body, dict) else response.text[:200]
    raise OutboundFailed(f"GitHub answered {response.status_code} {message!r} {doing}", status=response.status_code)
