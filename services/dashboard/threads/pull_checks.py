"""The state and checks of a thread's pull requests, read from GitHub as the App's installation
on its repository: the pull request (``GET /repos/{owner}/{repo}/pulls/{number}``), then the
latest check run of each name on its head (``GET …/commits/{sha}/check-runs``). Without a GitHub App there are none to
read; a failed read is shown as such on the page, never as an error of the page."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import httpx

from drydock.channels.errors import OutboundFailed
from drydock.channels.github.client import API_VERSION, GithubClient
from drydock.config import Settings
from drydock.credentials.user_tokens import app_authorization
from drydock.errors import describe
from services.dashboard.threads.schemas import CheckOut

PER_PAGE = 100
CACHE_SECONDS = 15.0
CACHE_SIZE = 1024


def outcome(run: dict[str, Any]) -> str:
    """A check run's conclusion once completed, else its status (queued, in_progress, …)."""
    if run.get("status") == "completed":
        return str(run.get("conclusion") or "completed")
    return str(run.get("status") or "pending")


@dataclass(frozen=True)
class PullStatus:
    state: str
    """open, closed or merged, as GitHub says now."""
    checks: list[CheckOut]


class PullChecks:
    def __init__(self, settings: Settings, http: httpx.AsyncClient) -> None:
        github = settings.github
        self._settings = github
        self._configured = github.app_id is not None and github.private_key is not None
        self._client: GithubClient | None = None
        self._api_url = github.api_url.rstrip("/")
        self._http = http
        # Every viewer of a thread redraws it when a run ends: one read serves them all.
        self._cache: OrderedDict[tuple[str, int], tuple[float, PullStatus]] = OrderedDict()

    @property
    def configured(self) -> bool:
        return self._configured

    def _github(self) -> GithubClient:
        if self._client is None:
            self._client = GithubClient(self._settings)
        return self._client

    async def _get(self, repository: str, path: str, params: dict[str, str] | None = None) -> Any:
        try:
            authorization = await app_authorization(self._github(), repository)
            response = await self._http.get(
                f"{self._api_url}{path}",
                params=params,
                headers={
                    "Authorization": authorization,
                    "Accept": "application/vnd.github+json",
                    "X-GitHub-Api-Version": API_VERSION,
                },
            )
        except httpx.HTTPError as error:
            raise OutboundFailed(f"GitHub unreachable: {describe(error)}") from None
        if response.status_code != 200:
            raise OutboundFailed(f"GitHub answered {response.status_code}", status=response.status_code)
        return response.json()

    async def of(self, repository: str, number: int) -> PullStatus:
        """The pull request's state and the latest run of each check on its head, by name (as
        read at most :data:`CACHE_SECONDS` ago); :class:`OutboundFailed` when GitHub does not tell."""
        key = (repository.lower(), number)
        cached = self._cache.get(key)
        now = time.monotonic()
        if cached is not None and cached[0] > now:
            return cached[1]
        status = await self._read(repository, number)
        self._cache[key] = (now + CACHE_SECONDS, status)
        self._cache.move_to_end(key)
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return status

    async def _read(self, repository: str, number: int) -> PullStatus:
        pull = await self._get(repository, f"/repos/{repository}/pulls/{number}")
        head = str((pull.get("head") or {}).get("sha") or "")
        state = "merged" if pull.get("merged_at") else str(pull.get("state") or "open")
        if not head:
            return PullStatus(state=state, checks=[])
        body = await self._get(
            repository,
            f"/repos/{repository}/commits/{head}/check-runs",
            {"filter": "latest", "per_page": str(PER_PAGE)},
        )
        runs = [run for run in body.get("check_runs") or [] if isinstance(run, dict)]
        checks = [
            CheckOut(name=str(run.get("name") or ""), outcome=outcome(run), url=run.get("html_url") or None)
            for run in runs
        ]
        return PullStatus(state=state, checks=sorted(checks, key=lambda check: check.name))

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
