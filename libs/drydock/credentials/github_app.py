"""Minting GitHub App installation tokens (github.com or GitHub Enterprise Server).

A token is scoped to the one repository of the thread (``repositories``) and, for read-only
roles, downgraded to read permissions, so the code host enforces what the proxy enforces.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog

from drydock.config import GithubSettings
from drydock.credentials.upstream_token import UpstreamToken
from drydock.errors import OutboundFailed, describe
from drydock.github import GithubClient, Installation
from drydock.github.installations import expiry
from drydock.sandbox.credentials import GrantError

TRANSPORT_RETRY_PAUSES = (0.25, 1.0)
"""Seconds before each further attempt when GitHub could not be reached."""

log = structlog.get_logger(__name__)

T = TypeVar("T")


class TokenMintError(GrantError):
    """GitHub did not issue an installation token; the message says why."""


class AppNotConfigured(ValueError):
    """The GitHub App id or private key is missing from the settings."""


class GithubAppTokens:
    """Mints installation tokens for one GitHub App through :class:`~drydock.github.GithubClient`."""

    def __init__(self, client: GithubClient, *, owns_client: bool = False) -> None:
        self._client = client
        self._owns_client = owns_client

    @classmethod
    def from_settings(cls, settings: GithubSettings) -> GithubAppTokens:
        if settings.app_id is None or settings.private_key is None:
            raise AppNotConfigured(
                "set DRYDOCK_GITHUB_APP_ID and DRYDOCK_GITHUB_PRIVATE_KEY to mint installation tokens"
            )
        return cls(GithubClient(settings), owns_client=True)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def _call(self, call: Callable[[], Awaitable[T]], doing: str) -> T:
        """One request; a connection that fails or times out is tried again after a pause
        (both calls are safe to repeat: a second mint only makes a second token). GitHub's
        refusals pass through as :class:`~drydock.errors.OutboundFailed`."""
        pauses = iter(TRANSPORT_RETRY_PAUSES)
        while True:
            try:
                return await call()
            except OutboundFailed as failure:
                if failure.status is not None:
                    raise
                pause = next(pauses, None)
                if pause is None:
                    raise TokenMintError(f"cannot reach GitHub {doing}: {describe(failure)}") from None
                log.info("GitHub not reached; trying again", doing=doing, error=describe(failure), pause=pause)
                await asyncio.sleep(pause)

    async def _installation(self, repository: str, *, fresh: bool = False) -> Installation:
        """The installation and its permissions on ``owner/name``; cached, as they rarely change."""
        try:
            return await self._call(
                lambda: self._client.installation(repository, fresh=fresh),
                f"looking up the App's installation on {repository}",
            )
        except OutboundFailed as failure:
            if failure.status == 404:
                raise TokenMintError(f"the GitHub App is not installed on {repository}") from None
            raise TokenMintError(failure.reason) from None

    async def mint(self, repository: str, *, read_only: bool) -> UpstreamToken:
        """A fresh installation token for ``owner/name`` only; read-only if asked."""
        installation = await self._installation(repository)
        names = [repository.partition("/")[2]]
        permissions = dict.fromkeys(installation.permissions, "read") if read_only else None
        doing = f"minting an installation token for {repository}"

        async def minted() -> dict[str, Any]:
            return await self._client.mint_token(installation.id, repositories=names, permissions=permissions)

        try:
            try:
                body = await self._call(minted, doing)
            except OutboundFailed as failure:
                if failure.status != 404:
                    raise
                # The installation was removed or replaced since it was cached: look it up once more.
                installation = await self._installation(repository, fresh=True)
                body = await self._call(minted, doing)
        except OutboundFailed as failure:
            raise TokenMintError(failure.reason) from None
        repositories = body.get("repositories")
        return UpstreamToken(
            token=str(body["token"]),
            expires_at=expiry(body),
            permissions={str(key): str(value) for key, value in (body.get("permissions") or {}).items()},
            repositories=tuple(str(repo["full_name"]) for repo in repositories)
            if isinstance(repositories, list)
            else None,
        )
