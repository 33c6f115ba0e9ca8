"""The repositories the GitHub App is installed on, as the App sees them: its installations
(``GET /app/installations``, as the App), then each installation's repositories (``GET
/installation/repositories``, with an installation token). Kept in Redis for a minute, so the
repositories page and the enable check do not ask GitHub on every request."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import cast

from redis.asyncio import Redis

from drydock.errors import OutboundFailed
from drydock.github import GithubClient
from drydock.infra.redis import Keys
from services.dashboard.errors import github_failure

CACHE_SECONDS = 60


@dataclass(frozen=True)
class InstalledRepository:
    full_name: str
    private: bool
    account: str


class Installations:
    def __init__(self, api: GithubClient, redis: Redis, keys: Keys) -> None:
        self._api = api
        self._redis = redis
        self._key = keys.installation_repositories()

    @property
    def configured(self) -> bool:
        return self._api.configured

    async def repositories(self, *, fresh: bool = False) -> list[InstalledRepository]:
        """Every repository the App is installed on, sorted; :class:`Unavailable` or
        :class:`BadGateway` when GitHub does not tell."""
        if not self.configured:
            return []
        cached = None if fresh else cast(str | None, await self._redis.get(self._key))
        if cached is not None:
            return [InstalledRepository(**item) for item in json.loads(cached)]
        found: dict[str, InstalledRepository] = {}
        try:
            for installation in await self._api.app_installations():
                account = str((installation.get("account") or {}).get("login") or "")
                for repo in await self._api.installation_repositories(int(installation["id"])):
                    name = str(repo.get("full_name") or "")
                    if name:
                        found[name.lower()] = InstalledRepository(name, bool(repo.get("private", True)), account)
        except OutboundFailed as failure:
            raise github_failure(failure) from None
        listed = sorted(found.values(), key=lambda repo: repo.full_name.lower())
        await self._redis.set(self._key, json.dumps([repo.__dict__ for repo in listed]), ex=CACHE_SECONDS)
        return listed
