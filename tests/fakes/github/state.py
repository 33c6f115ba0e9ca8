"""The fake GitHub's in-memory state: Apps, their installations, repositories, the
installation access tokens it has issued, users' OAuth tokens, pull requests and the Apps'
webhook deliveries."""

from __future__ import annotations

import asyncio
import itertools
import secrets
import string
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

INSTALLATION_TOKEN_LIFETIME = timedelta(hours=1)
"""GitHub's installation access tokens expire one hour after they are created."""

_TOKEN_ALPHABET = string.ascii_letters + string.digits


@dataclass
class App:
    id: int
    slug: str
    private_key: rsa.RSAPrivateKey
    webhook_url: str | None = None
    webhook_secret: str | None = None
    hook_id: int | None = None
    """The id of the App's webhook (``X-GitHub-Hook-ID``), given when it is first configured."""

    @property
    def private_key_pem(self) -> str:
        """The PEM GitHub lets an App owner download (PKCS#1, ``BEGIN RSA PRIVATE KEY``)."""
        return self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        ).decode()


@dataclass
class Repository:
    id: int
    owner: str
    name: str
    private: bool = True
    default_branch: str = "main"

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass
class Installation:
    id: int
    app_id: int
    account: str
    account_id: int
    account_type: str
    repository_selection: str
    repositories: list[Repository]
    permissions: dict[str, str]
    events: list[str] = field(default_factory=lambda: ["issues", "issue_comment", "pull_request", "check_run"])
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass
class InstallationToken:
    token: str
    installation_id: int
    expires_at: datetime
    permissions: dict[str, str]
    repositories: list[Repository] | None
    """``None`` when the token covers every repository of the installation."""

    def expired(self, now: datetime | None = None) -> bool:
        return (now or datetime.now(UTC)) >= self.expires_at


@dataclass
class UserToken:
    """A user's OAuth token (a GitHub App user-to-server token, ``ghu_…``)."""

    token: str
    login: str
    user_id: int
    repositories: set[str] | None
    """Lower-cased ``owner/name`` the user may write to; ``None``: every repository."""

    def reaches(self, full_name: str) -> bool:
        return self.repositories is None or full_name.lower() in self.repositories


@dataclass
class PullRequest:
    id: int
    repository: str
    """``owner/name`` as the repository spells it."""
    number: int
    title: str
    body: str | None
    head_ref: str
    head_sha: str
    base_ref: str
    draft: bool
    user: dict[str, object]
    state: str = "open"
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC).replace(microsecond=0))
    updated_at: datetime = field(default_factory=lambda: datetime.now(UTC).replace(microsecond=0))
    closed_at: datetime | None = None
    merged_at: datetime | None = None

    @property
    def owner(self) -> str:
        return self.repository.partition("/")[0]


_LEVELS = {"read": 1, "write": 2, "admin": 3}


def permission_allows(granted: str | None, needed: str) -> bool:
    """Whether a granted access level (``read``/``write``/``admin``) covers ``needed``."""
    return granted is not None and _LEVELS.get(granted, 0) >= _LEVELS[needed]


@dataclass
class HookDelivery:
    """One attempt at delivering a webhook to an App's URL, with GitHub's fields; a redelivery
    is a new attempt with the original's ``guid``."""

    id: int
    guid: str
    """The ``X-GitHub-Delivery`` header."""
    delivered_at: datetime
    redelivery: bool
    duration: float
    """Seconds until the answer, or until the attempt failed."""
    status: str
    """``OK`` for a 2xx, else why not (``Invalid HTTP Response: 503``, ``timed out``, …)."""
    status_code: int
    """The receiver's HTTP status; 0 when there was no HTTP answer."""
    event: str
    action: str | None
    installation_id: int | None
    repository_id: int | None
    app_id: int
    url: str
    headers: dict[str, str]
    """The request's headers without the signatures, which each attempt computes afresh."""
    body: bytes
    response_headers: dict[str, str] = field(default_factory=dict)
    response_body: str | None = None
    """``None`` when there was no HTTP answer."""
    throttled_at: None = None


@dataclass(frozen=True)
class SeenRequest:
    """A request the fake received, for tests to check what reached "GitHub"."""

    method: str
    path: str
    authorization: str | None


class GithubState:
    """Everything the fake knows. Tests arrange it directly; routers read and change it."""

    def __init__(self, *, webhook_timeout: float = 10.0) -> None:
        self._ids = itertools.count(1000)
        self._delivery_ids = itertools.count(1)
        self.requests: list[SeenRequest] = []
        self.apps: dict[int, App] = {}
        self.installations: dict[int, Installation] = {}
        self.repositories: dict[str, Repository] = {}
        self.tokens: dict[str, InstallationToken] = {}
        self.user_tokens: dict[str, UserToken] = {}
        self.pulls: dict[tuple[str, int], PullRequest] = {}
        """Pull requests by lower-cased ``owner/name`` and number."""
        self.webhook_timeout = webhook_timeout
        """Seconds GitHub waits for a webhook's answer before it gives the delivery up."""
        self.hook_deliveries: list[HookDelivery] = []
        """Every App's delivery attempts, oldest first."""
        self.redeliveries: set[asyncio.Task[HookDelivery]] = set()
        """Redeliveries asked for through the API and not yet collected; held here so that the
        event loop's weak references do not let them be garbage collected while running."""

    def next_id(self) -> int:
        return next(self._ids)

    def next_delivery_id(self) -> int:
        return next(self._delivery_ids)

    def configure_webhook(self, app: App, url: str, secret: str) -> None:
        """Point ``app``'s webhook at ``url``, signed with ``secret``; as GitHub, refuse a URL
        that is not an absolute http(s) one (``httpx.InvalidURL`` or ``ValueError``)."""
        parsed = httpx.URL(url)
        if parsed.scheme not in {"http", "https"} or not parsed.host:
            raise ValueError(f"{url!r} is not an absolute http(s) URL")
        app.webhook_url, app.webhook_secret = url, secret
        if app.hook_id is None:
            app.hook_id = self.next_id()

    def create_app(self, slug: str = "drydock") -> App:
        """Register an App with a fresh RSA key, as GitHub does when an owner generates one."""
        app = App(self.next_id(), slug, rsa.generate_private_key(public_exponent=65537, key_size=2048))
        self.apps[app.id] = app
        return app

    def repository(self, full_name: str) -> Repository:
        """The repository ``owner/name``, created on first use."""
        owner, _, name = full_name.partition("/")
        if not owner or not name or "/" in name:
            raise ValueError(f"{full_name!r} is not owner/name")
        key = full_name.lower()
        if key not in self.repositories:
            self.repositories[key] = Repository(self.next_id(), owner, name)
        return self.repositories[key]

    def install(
        self,
        app: App,
        account: str,
        repositories: list[str] | None = None,
        *,
        permissions: dict[str, str] | None = None,
        account_type: str = "Organization",
    ) -> Installation:
        """Install ``app`` on ``account``: on the named repositories (``selected``) or on all of
        the account's repositories (``all``, when ``repositories`` is ``None``)."""
        selection = "all" if repositories is None else "selected"
        repos = [self.repository(f"{account}/{name}") for name in repositories or []]
        installation = Installation(
            id=self.next_id(),
            app_id=app.id,
            account=account,
            account_id=self.next_id(),
            account_type=account_type,
            repository_selection=selection,
            repositories=repos,
            permissions=permissions
            or {
                "contents": "write",
                "metadata": "read",
                "pull_requests": "write",
                "issues": "write",
                "checks": "write",
            },
        )
        self.installations[installation.id] = installation
        return installation

    def installation_repositories(self, installation: Installation) -> list[Repository]:
        if installation.repository_selection == "selected":
            return list(installation.repositories)
        return [repo for repo in self.repositories.values() if repo.owner.lower() == installation.account.lower()]

    def installation_for(self, app_id: int, full_name: str) -> Installation | None:
        """The App's installation that can reach ``owner/name``, if any."""
        for installation in self.installations.values():
            if installation.app_id != app_id:
                continue
            if any(
                repo.full_name.lower() == full_name.lower() for repo in self.installation_repositories(installation)
            ):
                return installation
        return None

    def issue_token(
        self, installation: Installation, permissions: dict[str, str], repositories: list[Repository] | None
    ) -> InstallationToken:
        token = InstallationToken(
            token="ghs_" + "".join(secrets.choice(_TOKEN_ALPHABET) for _ in range(36)),
            installation_id=installation.id,
            expires_at=(datetime.now(UTC) + INSTALLATION_TOKEN_LIFETIME).replace(microsecond=0),
            permissions=permissions,
            repositories=repositories,
        )
        self.tokens[token.token] = token
        return token

    def add_user_token(self, login: str, repositories: list[str] | None = None) -> UserToken:
        """A user's OAuth token that may write to ``repositories`` (``None``: to every one)."""
        token = UserToken(
            token="ghu_" + "".join(secrets.choice(_TOKEN_ALPHABET) for _ in range(36)),
            login=login,
            user_id=self.next_id(),
            repositories=None if repositories is None else {name.lower() for name in repositories},
        )
        self.user_tokens[token.token] = token
        return token

    def pulls_of(self, full_name: str) -> list[PullRequest]:
        return [pull for (repo, _), pull in sorted(self.pulls.items()) if repo == full_name.lower()]

    def token_repositories(self, token: InstallationToken) -> list[Repository]:
        if token.repositories is not None:
            return token.repositories
        return self.installation_repositories(self.installations[token.installation_id])

    def token_allows(self, token: str, full_name: str, *, permission: str, level: str) -> bool:
        """Whether the installation token ``token`` is live, reaches ``owner/name`` and holds
        ``permission`` at ``level`` or above; what GitHub checks before serving a request."""
        issued = self.tokens.get(token)
        if issued is None or issued.expired():
            return False
        if not any(repo.full_name.lower() == full_name.lower() for repo in self.token_repositories(issued)):
            return False
        return permission_allows(issued.permissions.get(permission), level)
