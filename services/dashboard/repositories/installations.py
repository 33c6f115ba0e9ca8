"""The repositories the GitHub App is installed on, as the App sees them: its installations
(``GET /app/installations``, as the App), then each installation's repositories (``GET
/installation/repositories``, with an installation token). Kept in Redis for a minute, so the
repositories page and the enable check do not ask GitHub on every request."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast

import httpx
from redis.asyncio import Redis

from drydock.channels.github.app_jwt import AppBearer
from drydock.config import Settings
from drydock.errors import describe
from drydock.infra.redis import Keys
from services.dashboard.errors import BadGateway, Unavailable

CACHE_SECONDS = 60
MAX_PAGES = 20
API_VERSION = "2022-11-28"


@dataclass(frozen=True)
class InstalledRepository:
    full_name: str
    private: bool
    account: str


class Installations:
    def __init__(self, settings: Settings, redis: Redis, keys: Keys, http: httpx.AsyncClient) -> None:
        github = settings.github
        self._app = (
            AppBearer(github.app_id, github.private_key.get_secret_value())
            if github.app_id is not None and github.private_key is not None
            else None
        )
        self._api_url = github.api_url.rstrip("/")
        self._redis = redis
        self._key = keys.installation_repositories()
        self._http = http

    @property
    def configured(self) -> bool:
        return self._app is not None

    async def repositories(self, *, fresh: bool = False) -> list[InstalledRepository]:
        """Every repository the App is installed on, sorted; :class:`Unavailable` or
        :class:`BadGateway` when GitHub does not tell."""
        if self._app is None:
            return []
        cached = None if fresh else cast(str | None, await self._redis.get(self._key))
        if cached is not None:
            return [InstalledRepository(**item) for item in json.loads(cached)]
        found: dict[str, InstalledRepository] = {}
        for installation in await self._pages("/app/installations", self._app.header(), None):
            account = str((installation.get("account") or {}).get("login") or "")
            token = await self._installation_token(int(installation["id"]))
            for repo in await self._pages("/installation/repositories", f"token {token}", "repositories"):
                name = str(repo.get("full_name") or "")
                if name:
                    found[name.lower()] = InstalledRepository(name, bool(repo.get("private", True)), account)
        listed = sorted(found.values(), key=lambda repo: repo.full_name.lower())
        await self._redis.set(self._key, json.dumps([repo.__dict__ for repo in listed]), ex=CACHE_SECONDS)
        return listed

    async def _installation_token(self, installation_id: int) -> str:
        assert self._app is not None
        response = await self._send("POST", f"/app/installations/{installation_id}/access_tokens", self._app.header())
        body = response.json()
        return str(body["token"])

    async def _send(
        self, method: str, url: str, authorization: str, params: dict[str, str] | None = None
    ) -> httpx.Response:
        try:
            response = await self._http.request(
                method,
                f"{self._api_url}{url}" if url.startswith("/") else url,
                params=params,
                headers={
                    "Authorization": authorization,
                    "Accept": "application/vnd.github+json",
                    "X-GitHub-Api-Version": API_VERSION,
                },
            )
        except httpx.HTTPError as error:
            raise Unavailable(f"GitHub cannot be reached: {describe(error)}") from None
        if not response.is_success:
            raise BadGateway(f"GitHub answered {response.status_code} to {method} {url.split('?')[0]}")
        return response

    async def _pages(self, path: str, authorization: str, field: str | None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        url: str | None = path
        params: dict[str, str] | None = {"per_page": "100"}
        for _ in range(MAX_PAGES):
            if url is None:
                break
            response = await self._send("GET", url, authorization, params)
            body = response.json()
            page = body.get(field) if field is not None and isinstance(body, dict) else body
            items += [item for item in page if isinstance(item, dict)] if isinstance(page, list) else []
            url, params = response.links.get("next", {}).get("url"), None
        return items
