"""The state and checks of a thread's pull requests, read from GitHub as the App's installation
on its repository: the pull request (``GET /repos/{owner}/{repo}/pulls/{number}``), then the
latest check run of each name on its head (``GET …/commits/{sha}/check-runs``). Without a GitHub App there are none to
read; a failed read is shown as such on the page, never as an error of the page."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from drydock.github import GithubClient
from services.dashboard.threads.schemas import CheckOut

CHECK_RUNS = 100
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
    def __init__(self, api: GithubClient) -> None:
        self._api = api
        # Every viewer of a thread redraws it when a run ends: one read serves them all.
        self._cache: OrderedDict[tuple[str, int], tuple[float, PullStatus]] = OrderedDict()

    @property
    def configured(self) -> bool:
        return self._api.configured

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
        authorization = await self._api.app_authorization(repository)
        pull = await self._api.get_pull(authorization, repository, number)
        head = str((pull.get("head") or {}).get("sha") or "")
        state = "merged" if pull.get("merged_at") else str(pull.get("state") or "open")
        if not head:
            return PullStatus(state=state, checks=[])
        runs = await self._api.list_check_runs(authorization, repository, head, limit=CHECK_RUNS)
        checks = [
            CheckOut(name=str(run.get("name") or ""), outcome=outcome(run), url=run.get("html_url") or None)
            for run in runs
        ]
        return PullStatus(state=state, checks=sorted(checks, key=lambda check: check.name))
