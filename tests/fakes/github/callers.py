"""Who is calling the fake, and may they: the App behind an installation token, and GitHub's
answers when a token does not reach a repository (404) or lacks a permission (403)."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from tests.fakes.github.auth import state
from tests.fakes.github.errors import GithubError, not_found
from tests.fakes.github.state import App, InstallationToken


def app_of(request: Request, token: InstallationToken) -> App:
    github = state(request)
    return github.apps[github.installations[token.installation_id].app_id]


def bot_user(app: App) -> dict[str, Any]:
    """The App's bot account, as GitHub shows it on what the App writes."""
    return {
        "login": f"{app.slug}[bot]",
        "id": 41898282 + app.id,
        "node_id": f"BOT_{app.id}",
        "type": "Bot",
        "site_admin": False,
    }


def require(request: Request, token: InstallationToken, full_name: str, permission: str, documentation: str) -> None:
    """404 when the token does not reach ``full_name``; 403 when it lacks ``permission: write``."""
    github = state(request)
    if not github.token_allows(token.token, full_name, permission="metadata", level="read"):
        raise not_found(documentation)
    if not github.token_allows(token.token, full_name, permission=permission, level="write"):
        raise GithubError(403, "Resource not accessible by integration", documentation)


def body_field(body: dict[str, Any] | None, name: str, documentation: str) -> str:
    """A required string field of a JSON request body; GitHub's 422 when it is absent."""
    value = (body or {}).get(name)
    if not isinstance(value, str) or not value:
        raise GithubError(422, f'Invalid request.\n\n"{name}" wasn\'t supplied.', documentation)
    return value
