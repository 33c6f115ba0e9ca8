"""Which repositories a signed-in person may see, and so whose threads.

Asked of GitHub with the person's own token at sign-in (:meth:`GithubSignIn.repositories`) and
kept in Redis for ``access_ttl`` (every replica agrees); after that it is asked again with the
token stored at sign-in (encrypted, :class:`~drydock.credentials.user_tokens.UserTokens`). Without
a stored token (no ``DRYDOCK_CRYPTO_KEYS``) the answer from sign-in is kept for the session's
lifetime instead. A development login sees the enabled repositories; an OpenID Connect login
none (its own threads only), unless it is an administrator, who sees everything anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import cast

import structlog
from redis.asyncio import Redis

from drydock.accounts import AccountsStore
from drydock.credentials.user_tokens import UserTokens
from drydock.infra.redis import Keys
from services.dashboard.auth.github import GithubSignIn
from services.dashboard.auth.sessions import Session
from services.dashboard.errors import DashboardError

log = structlog.get_logger(__name__)

_NONE = ""
"""A member that keeps an empty answer in Redis (a set without members does not exist)."""


class RepositoryAccess:
    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        accounts: AccountsStore,
        *,
        ttl: timedelta,
        session_ttl: timedelta,
        github: GithubSignIn | None,
        tokens: UserTokens | None,
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._accounts = accounts
        self._ttl = ttl
        self._session_ttl = session_ttl
        self._github = github
        self._tokens = tokens

    async def remember(self, user_id: str, repositories: set[str], *, refreshable: bool) -> None:
        """Keep the answer GitHub gave at sign-in; ``refreshable`` when a token was stored to ask again."""
        ttl = self._ttl if refreshable else max(self._ttl, self._session_ttl)
        key = self._keys.user_repositories(user_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(key)
            pipe.sadd(key, _NONE, *sorted(name.lower() for name in repositories))
            pipe.pexpire(key, int(ttl.total_seconds() * 1000))
            await pipe.execute()

    async def of(self, session: Session) -> frozenset[str]:
        """The repositories ``session``'s person may see (lower-cased ``owner/name``)."""
        if session.provider == "dev":
            return frozenset(repo.full_name.lower() for repo in await self._accounts.repositories())
        cached = cast(set[str], await self._redis.smembers(self._keys.user_repositories(session.user_id)))
        if cached:
            return frozenset(cached - {_NONE})
        if session.provider != "github" or self._github is None or self._tokens is None:
            return frozenset()
        token = await self._tokens.get(session.user_id)
        if token is None:
            return frozenset()
        try:
            found = await self._github.repositories(token)
        except DashboardError as error:
            log.warning("repository access not refreshed", user_id=session.user_id, error=error.message)
            return frozenset()
        await self.remember(session.user_id, found, refreshable=True)
        return frozenset(found)

    async def visible(self, session: Session) -> Visible:
        """What ``session``'s person may see, read once for a page that asks many times."""
        return Visible(session.user_id, None if session.admin else await self.of(session))

    async def may_see(self, session: Session, repository: str | None) -> bool:
        return (await self.visible(session)).repository(repository)

    async def may_see_thread(self, session: Session, owner: str | None, repository: str | None) -> bool:
        return (await self.visible(session)).thread(owner, repository)


@dataclass(frozen=True)
class Visible:
    """What one person may see: the repositories (every one for an administrator, ``None``), and
    so the threads of those repositories, and the threads they own."""

    user_id: str
    repositories: frozenset[str] | None

    def repository(self, name: str | None) -> bool:
        return self.repositories is None or (name is not None and name.lower() in self.repositories)

    def thread(self, owner: str | None, repository: str | None) -> bool:
        return (owner is not None and owner == self.user_id) or self.repository(repository)
