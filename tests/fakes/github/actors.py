"""Who acts through a request on the endpoints that take either credential: the App's bot (an
installation token) or a user (an OAuth token, ``Authorization: token ghu_…`` or ``Bearer``).
An installation reaches the repositories it is installed on with its permissions; a user the
repositories their token was registered for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request

from tests.fakes.github.auth import state
from tests.fakes.github.callers import bot_user
from tests.fakes.github.errors import GithubError, not_found
from tests.fakes.github.state import GithubState, InstallationToken, UserToken


@dataclass(frozen=True)
class Actor:
    user: dict[str, Any]
    """The account GitHub shows on what the actor writes."""
    installation: InstallationToken | None = None
    oauth: UserToken | None = None

    def allows(self, github: GithubState, full_name: str, permission: str, level: str) -> bool:
        if self.installation is not None:
            return github.token_allows(self.installation.token, full_name, permission=permission, level=level)
        return self.oauth is not None and self.oauth.reaches(full_name)


def user_json(token: UserToken) -> dict[str, Any]:
    return {
        "login": token.login,
        "id": token.user_id,
        "node_id": f"U_{token.user_id}",
        "type": "User",
        "site_admin": False,
    }


def acting(request: Request) -> Actor:
    """The caller of this request; 401 ``Bad credentials`` unless it is a live installation
    token or a registered user token."""
    header = request.headers.get("authorization")
    if header is None:
        raise GithubError(401, "Requires authentication")
    scheme, _, credential = header.partition(" ")
    if scheme.lower() not in {"token", "bearer"}:
        raise GithubError(401, "Bad credentials")
    github = state(request)
    credential = credential.strip()
    issued = github.tokens.get(credential)
    if issued is not None and not issued.expired():
        app = github.apps[github.installations[issued.installation_id].app_id]
        return Actor(bot_user(app), installation=issued)
    user = github.user_tokens.get(credential)
    if user is not None:
        return Actor(user_json(user), oauth=user)
    raise GithubError(401, "Bad credentials")


def require_access(
    request: Request, actor: Actor, full_name: str, permission: str, documentation: str, *, level: str = "write"
) -> None:
    """404 when the actor cannot see ``full_name``; 403 when it lacks ``permission`` at ``level``."""
    github = state(request)
    if not actor.allows(github, full_name, "metadata", "read"):
        raise not_found(documentation)
    if not actor.allows(github, full_name, permission, level):
        raise GithubError(403, "Resource not accessible by integration", documentation)
