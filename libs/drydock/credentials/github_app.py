"""Minting GitHub App installation tokens (github.com or GitHub Enterprise Server).

A token is scoped to the one repository of the thread (``repositories``) and, for read-only
roles, downgraded to read permissions, so the code host enforces what the proxy enforces.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from datetime import datetime
from typing import Any

import httpx
import structlog

from drydock.channels.github.app_jwt import AppBearer
from drydock.config import GithubSettings
from drydock.credentials.upstream_token import UpstreamToken
from drydock.errors import describe
from drydock.sandbox.credentials import GrantError

API_VERSION = "2022-11-28"
TRANSPORT_RETRY_PAUSES = (0.25, 1.0)
"""Seconds before each further attempt when GitHub could not be reached."""

log = structlog.get_logger(__name__)


@functools.cache
def _tls() -> ssl.SSLContext:
    """One verification context per process (building one costs tens of milliseconds), from the
    system's trust store, so a GitHub Enterprise server's private CA is trusted once installed there."""
    return ssl.create_default_context()


class TokenMintError(GrantError):
    """GitHub did not issue an installation token; the message says why."""


class AppNotConfigured(ValueError):
    """The GitHub App id or private key is missing from the settings."""


class GitHubAppTokens:
    """Mints installation tokens for one GitHub App over the REST API at ``api_url``."""

    def __init__(self, *, app_id: int, private_key: str, api_url: str, timeout: float = 10.0) -> None:
        self._app = AppBearer(app_id, private_key)
        self._api_url = api_url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self._api_url,
            timeout=timeout,
            verify=_tls(),
            headers={"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION},
        )
        self._installations: dict[str, tuple[int, dict[str, str]]] = {}

    @classmethod
    def from_settings(cls, settings: GithubSettings) -> GitHubAppTokens:
        if settings.app_id is None or settings.private_key is None:
            raise AppNotConfigured(
                "set DRYDOCK_GITHUB_APP_ID and DRYDOCK_GITHUB_PRIVATE_KEY to mint installation tokens"
            )
        return cls(
            app_id=settings.app_id, private_key=settings.private_key.get_secret_value(), api_url=settings.api_url
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, json: dict[str, Any] | None = None) -> httpx.Response:
        """One request; a connection that fails or times out is tried again after a pause
        (both calls are safe to repeat: a second mint only makes a second token)."""
        pauses = iter(TRANSPORT_RETRY_PAUSES)
        while True:
            try:
                return await self._http.request(method, path, json=json, headers={"Authorization": self._app.header()})
            except httpx.HTTPError as error:
                pause = next(pauses, None) if isinstance(error, httpx.TransportError) else None
                if pause is None:
                    raise TokenMintError(f"cannot reach GitHub at {self._api_url}: {describe(error)}") from None
                log.info("GitHub not reached; trying again", path=path, error=describe(error), pause=pause)
                await asyncio.sleep(pause)

    async def _installation(self, repository: str) -> tuple[int, dict[str, str]]:
        """The installation id and permissions for ``owner/name``; cached, as they rarely change."""
        cached = self._installations.get(repository.lower())
        if cached is not None:
            return cached
        response = await self._call("GET", f"/repos/{repository}/installation")
        if response.status_code == 404:
            raise TokenMintError(f"the GitHub App {self._app.app_id} is not installed on {repository}")
        body = _json_or_fail(response, f"looking up the App's installation on {repository}")
        found = (int(body["id"]), dict(body.get("permissions") or {}))
        self._installations[repository.lower()] = found
        return found

    async def mint(self, repository: str, *, read_only: bool) -> UpstreamToken:
        """A fresh installation token for ``owner/name`` only; read-only if asked."""
        installation_id, permissions = await self._installation(repository)
        request: dict[str, Any] = {"repositories": [repository.partition("/")[2]]}
        if read_only:
            request["permissions"] = dict.fromkeys(permissions, "read")
        response = await self._call("POST", f"/app/installations/{installation_id}/access_tokens", request)
        if response.status_code == 404:
            # The installation was removed or replaced since it was cached: look it up once more.
            self._installations.pop(repository.lower(), None)
            installation_id, _ = await self._installation(repository)
            response = await self._call("POST", f"/app/installations/{installation_id}/access_tokens", request)
        body = _json_or_fail(response, f"minting an installation token for {repository}")
        repositories = body.get("repositories")
        return UpstreamToken(
            token=body["token"],
            expires_at=datetime.fromisoformat(body["expires_at"].replace("Z", "+00:00")),
            permissions=dict(body.get("permissions") or {}),
            repositories=tuple(repo["full_name"] for repo in repositories) if repositories is not None else None,
        )


def _json_or_fail(response: httpx.Response, doing: str) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.is_success and isinstance(body, dict):
        return body
    message = body.get("message") if isinstance(body, dict) else response.text[:200]
    raise TokenMintError(f"GitHub answered {response.status_code} {message!r} {doing}")
