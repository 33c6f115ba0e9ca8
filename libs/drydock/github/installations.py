"""Installations and tokens: the App's installations (on a repository, an organization, all of
them) and installation tokens, as the App itself (its JWT, :mod:`drydock.github.app_jwt`).

Tokens for the client's own requests are cached per installation until ``token_refresh_margin``
before they expire; a 401 drops the cached token and retries once, and concurrent callers for
one installation mint once. :meth:`Installations.mint_token` makes a fresh token each time, with
the scope asked for (the credential proxy's tokens).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
from githubkit import TokenAuthStrategy

from drydock.github.pagination import pages
from drydock.github.responses import checked
from drydock.github.session import GithubSession


@dataclass(frozen=True)
class Installation:
    id: int
    permissions: dict[str, str] = field(default_factory=dict)


def expiry(body: dict[str, Any]) -> datetime:
    """The ``expires_at`` of an installation token answer."""
    return datetime.fromisoformat(str(body["expires_at"]).replace("Z", "+00:00"))


class Installations(GithubSession):
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
            body = await self.mint_token(installation_id)
            self._tokens[installation_id] = (str(body["token"]), expiry(body).timestamp())
            return str(body["token"])

    async def mint_token(
        self,
        installation_id: int,
        *,
        repositories: list[str] | None = None,
        permissions: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """A fresh installation token (``token``, ``expires_at``, ``permissions``, ``repositories``),
        limited to ``repositories`` (names without the owner) and ``permissions`` when given."""
        request: dict[str, Any] = {}
        if repositories is not None:
            request["repositories"] = repositories
        if permissions is not None:
            request["permissions"] = permissions
        response = await self.send(
            self.as_app, "POST", f"/app/installations/{installation_id}/access_tokens", request or None
        )
        return checked(response, f"minting a token for installation {installation_id}")

    async def installation(self, full_name: str, *, fresh: bool = False) -> Installation:
        """The App's installation on ``owner/name`` and its permissions (cached unless ``fresh``:
        it rarely changes); :class:`~drydock.errors.OutboundFailed` with status 404 where the
        App is not installed."""
        found = None if fresh else self._installations.get(full_name.lower())
        if found is not None:
            return found
        owner, _, name = full_name.partition("/")
        response = await self.send(self.as_app, "GET", f"/repos/{owner}/{name}/installation")
        body = checked(response, f"looking up the App's installation on {full_name}")
        permissions = body.get("permissions") or {}
        found = Installation(int(body["id"]), {str(key): str(value) for key, value in permissions.items()})
        self._installations[full_name.lower()] = found
        return found

    async def installation_for(self, full_name: str) -> int:
        """The id of the App's installation on ``owner/name`` (cached: it rarely changes)."""
        return (await self.installation(full_name)).id

    async def org_installation(self, org: str) -> int | None:
        """The App's installation on an organization; ``None`` if it is not installed there."""
        found = self._installations.get(f"org:{org.lower()}")
        if found is not None:
            return found.id
        response = await self.send(self.as_app, "GET", f"/orgs/{org}/installation")
        if response.status_code == 404:
            return None
        installation_id = int(checked(response, f"looking up the App's installation on {org}")["id"])
        self._installations[f"org:{org.lower()}"] = Installation(installation_id)
        return installation_id

    async def app_installations(self, *, limit: int = 2000) -> list[dict[str, Any]]:
        """The App's installations (``id``, ``account``, …)."""

        async def fetch(url: str, params: dict[str, str] | None) -> httpx.Response:
            return await self.send(self.as_app, "GET", url, params=params)

        return await pages(fetch, "/app/installations", "listing the App's installations", limit=limit)

    async def installation_repositories(self, installation_id: int, *, limit: int = 2000) -> list[dict[str, Any]]:
        """The repositories an installation reaches (``full_name``, ``private``, …)."""

        async def fetch(url: str, params: dict[str, str] | None) -> httpx.Response:
            return await self.as_installation(installation_id, None, "GET", url, params=params)

        doing = f"listing the repositories of installation {installation_id}"
        return await pages(fetch, "/installation/repositories", doing, limit=limit, field="repositories")

    async def as_installation(
        self,
        installation_id: int | None,
        full_name: str | None,
        method: str,
        path: str,
        json: Any = None,
        params: dict[str, str] | None = None,
    ) -> httpx.Response:
        """One request as the App's installation (``installation_id``, or the one on ``full_name``)."""
        if installation_id is None:
            if full_name is None:
                raise ValueError("an installation id or a repository is required")
            installation_id = await self.installation_for(full_name)
        token = TokenAuthStrategy(await self.installation_token(installation_id))
        response = await self.send(self._github.with_auth(token), method, path, json, params)
        if response.status_code == 401:
            self._tokens.pop(installation_id, None)
            token = TokenAuthStrategy(await self.installation_token(installation_id))
            response = await self.send(self._github.with_auth(token), method, path, json, params)
        return response

    async def app_authorization(self, full_name: str) -> str:
        """The ``Authorization`` header of the App's installation on ``owner/name``."""
        return f"token {await self.installation_token(await self.installation_for(full_name))}"
