"""Where upstream tokens come from: the :class:`TokenMinter` protocol and the stand-in used
when no GitHub App is configured."""

from __future__ import annotations

from typing import Protocol

from drydock.config import GithubSettings
from drydock.credentials.github_app import AppNotConfigured, GithubAppTokens, TokenMintError
from drydock.credentials.upstream_token import UpstreamToken


class TokenMinter(Protocol):
    async def mint(self, repository: str, *, read_only: bool) -> UpstreamToken:
        """A fresh token for ``owner/name`` only; raise :class:`TokenMintError` if refused."""
        ...

    async def aclose(self) -> None: ...


class NoApp:
    """Refuses every mint with the configuration that is missing, so a process without a
    GitHub App (a laptop) still starts, and the refusal says what to set."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    async def mint(self, repository: str, *, read_only: bool) -> UpstreamToken:
        raise TokenMintError(f"no installation token for {repository}: {self.reason}")

    async def aclose(self) -> None:
        return None


def minter_from_settings(settings: GithubSettings) -> TokenMinter:
    """The GitHub App minter, or :class:`NoApp` naming the missing settings."""
    try:
        return GithubAppTokens.from_settings(settings)
    except AppNotConfigured as error:
        return NoApp(str(error))
