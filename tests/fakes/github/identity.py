"""The fake GitHub's people and sign-in state: user accounts, teams, the OAuth clients of Apps
(client id and secret, callback URLs), authorization codes, and who the browser is signed in as
on GitHub. Kept beside :class:`GithubState` and reached with :func:`identity_of`, as
:mod:`tests.fakes.github.activity` is."""

from __future__ import annotations

import secrets
import string
import weakref
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from tests.fakes.github.state import App, GithubState, Installation, Repository, UserToken

CODE_LIFETIME = timedelta(minutes=10)
"""GitHub's authorization codes expire after ten minutes."""
USER_TOKEN_LIFETIME = timedelta(hours=8)
"""A GitHub App's user access tokens expire after eight hours."""

_ALPHABET = string.ascii_letters + string.digits


def _random(length: int) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


@dataclass
class User:
    id: int
    login: str
    name: str = ""
    email: str | None = None
    repositories: set[str] | None = None
    """Lower-cased ``owner/name`` the person may access; ``None``: every repository."""

    def reaches(self, full_name: str) -> bool:
        return self.repositories is None or full_name.lower() in self.repositories


@dataclass
class Team:
    id: int
    organization: str
    slug: str
    name: str
    members: set[str] = field(default_factory=set)


@dataclass
class OAuthClient:
    """The OAuth side of a GitHub App: what Drydock's dashboard is configured with."""

    app_id: int
    client_id: str
    client_secret: str
    callback_urls: list[str]


@dataclass
class Grant:
    """An authorization code waiting to be exchanged."""

    code: str
    client_id: str
    redirect_uri: str
    code_challenge: str | None
    code_challenge_method: str | None
    login: str
    expires_at: datetime
    used: bool = False


class Identity:
    def __init__(self, github: GithubState) -> None:
        self._github = github
        self.users: dict[str, User] = {}
        self.teams: list[Team] = []
        self.clients: dict[str, OAuthClient] = {}
        self.grants: dict[str, Grant] = {}
        self.authorized: set[tuple[str, str]] = set()
        """(login, client id) pairs that approved the App once; GitHub then skips the consent page."""
        self.token_clients: dict[str, str] = {}
        """User tokens issued through OAuth, by token: the client id that got them."""
        self.signed_in: str | None = None
        """The login the browser is signed in as on GitHub; ``None``: the authorize page asks."""

    def add_user(self, login: str, *, name: str = "", repositories: list[str] | None = None) -> User:
        """A GitHub account that may access ``repositories`` (``None``: every repository)."""
        user = User(
            self._github.next_id(),
            login,
            name,
            f"{login}@users.noreply.github.com",
            None if repositories is None else {repo.lower() for repo in repositories},
        )
        self.users[login.lower()] = user
        return user

    def user(self, login: str) -> User | None:
        return self.users.get(login.lower())

    def add_team(self, organization: str, slug: str, members: list[str]) -> Team:
        team = Team(
            self._github.next_id(), organization, slug, slug.replace("-", " ").title(), {m.lower() for m in members}
        )
        self.teams.append(team)
        return team

    def teams_of(self, login: str) -> list[Team]:
        return [team for team in self.teams if login.lower() in team.members]

    def oauth_client(self, app: App, *, callback_url: str | None = None) -> OAuthClient:
        """The App's client id and secret (created on first use); ``callback_url`` is registered."""
        found = next((client for client in self.clients.values() if client.app_id == app.id), None)
        if found is None:
            found = OAuthClient(app.id, "Iv23li" + _random(14), _random(40), [])
            self.clients[found.client_id] = found
        if callback_url is not None and callback_url not in found.callback_urls:
            found.callback_urls.append(callback_url)
        return found

    def grant(
        self, client: OAuthClient, login: str, redirect_uri: str, challenge: str | None, method: str | None
    ) -> Grant:
        grant = Grant(
            _random(20).lower(), client.client_id, redirect_uri, challenge, method, login,
            datetime.now(UTC) + CODE_LIFETIME,
        )  # fmt: skip
        self.grants[grant.code] = grant
        return grant

    def issue_token(self, client: OAuthClient, user: User) -> UserToken:
        """A user access token (``ghu_…``) of ``client``'s App for ``user``."""
        token = UserToken("ghu_" + _random(36), user.login, user.id, user.repositories)
        self._github.user_tokens[token.token] = token
        self.token_clients[token.token] = client.client_id
        return token

    def installations_for(self, token: str) -> list[Installation]:
        """The installations of the token's App with a repository its user may access."""
        client = self.clients.get(self.token_clients.get(token, ""))
        issued = self._github.user_tokens.get(token)
        if client is None or issued is None:
            return []
        user = self.user(issued.login)
        return [
            installation
            for installation in self._github.installations.values()
            if installation.app_id == client.app_id and self.repositories_for(installation, user)
        ]

    def repositories_for(self, installation: Installation, user: User | None) -> list[Repository]:
        return [
            repo
            for repo in self._github.installation_repositories(installation)
            if user is not None and user.reaches(repo.full_name)
        ]


_IDENTITIES: weakref.WeakKeyDictionary[GithubState, Identity] = weakref.WeakKeyDictionary()


def identity_of(github: GithubState) -> Identity:
    """The people and sign-in state of one fake GitHub."""
    found = _IDENTITIES.get(github)
    if found is None:
        found = _IDENTITIES[github] = Identity(github)
    return found
