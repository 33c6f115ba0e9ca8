"""The accounts store: the only module that reads or writes account records in Redis.

Linked accounts map an external account (GitHub user id, Slack user id, Linear user id) to a
Drydock user. Reads that a hot path batches with other commands have a ``queue_*`` twin that
adds the command to a caller's pipeline; the model's ``from_json`` (``from_hash`` for profiles)
decodes the reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import cast

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from drydock.accounts.records import (
    Provider,
    RepositorySettings,
    TeamDefaults,
    UserIdentity,
    UserProfile,
    repository_name,
)
from drydock.infra.redis import Keys, Queue

# KEYS: the link, the user's accounts. ARGV: user id, "provider:external id".
# Returns the user the account was already linked to ('' when it was free, or now linked).
_LINK_IF_FREE = """
local current = redis.call('GET', KEYS[1])
if current and current ~= ARGV[1] then return current end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[2], ARGV[2])
return ''
"""


@dataclass(frozen=True)
class RunAccounts:
    """What a run reads of the accounts before it starts (:meth:`AccountsStore.for_run`)."""

    profile: UserProfile | None
    """The run's user's profile; ``None`` for a run without a user."""
    identity: UserIdentity | None
    """The run's user's dashboard identity; ``None`` without a user or before their first sign-in."""
    team: TeamDefaults
    repository: RepositorySettings | None
    """The run's repository's settings; ``None`` without a repository or when it is not enabled."""


class AccountTaken(Exception):
    """The external account is linked to another Drydock user."""

    def __init__(self, provider: Provider, external_id: str) -> None:
        super().__init__(f"the {provider.value} account {external_id} is linked to another Drydock user")
        self.provider = provider
        self.external_id = external_id


_NOT_IN_AN_ID = re.compile(r"[ \t\r\n]")


def _external_id(external_id: str) -> str:
    if not external_id or _NOT_IN_AN_ID.search(external_id) is not None:
        raise ValueError(f"invalid external account id: {external_id!r}")
    return external_id


class AccountsStore:
    """Linked accounts, user profiles, team defaults and enabled repositories of one code host."""

    def __init__(self, redis: Redis, keys: Keys, *, host: str) -> None:
        self._redis = redis
        self._keys = keys
        self.host = host
        self._link_if_free = redis.register_script(_LINK_IF_FREE)

    async def link(self, provider: Provider, external_id: str, user_id: str) -> None:
        """Link an external account to a user, replacing an earlier link of that account."""
        if not user_id:
            raise ValueError("a user id is required")
        key = self._keys.account_link(provider, _external_id(external_id))
        previous = cast(str | None, await self._redis.get(key))
        async with self._redis.pipeline(transaction=True) as pipe:
            if previous and previous != user_id:
                pipe.srem(self._keys.user_accounts(previous), f"{provider}:{external_id}")
            pipe.set(key, user_id)
            pipe.sadd(self._keys.user_accounts(user_id), f"{provider}:{external_id}")
            await pipe.execute()

    async def link_if_free(self, provider: Provider, external_id: str, user_id: str) -> None:
        """Link an external account to a user unless another user has it (:class:`AccountTaken`):
        what a person may do for themselves, where :meth:`link` may move a link."""
        if not user_id:
            raise ValueError("a user id is required")
        key = self._keys.account_link(provider, _external_id(external_id))
        taken = await self._link_if_free(
            keys=[key, self._keys.user_accounts(user_id)], args=[user_id, f"{provider}:{external_id}"]
        )
        if taken:
            raise AccountTaken(provider, external_id)

    async def unlink(self, provider: Provider, external_id: str) -> bool:
        """Remove the link; False if the account was not linked."""
        key = self._keys.account_link(provider, _external_id(external_id))
        user_id = cast(str | None, await self._redis.get(key))
        if user_id is None:
            return False
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(key)
            pipe.srem(self._keys.user_accounts(user_id), f"{provider}:{external_id}")
            await pipe.execute()
        return True

    async def user_for(self, provider: Provider, external_id: str) -> str | None:
        """The Drydock user an external account is linked to."""
        return cast(str | None, await self._redis.get(self._keys.account_link(provider, _external_id(external_id))))

    def queue_user_for(self, pipe: Queue, provider: Provider, external_id: str) -> None:
        pipe.get(self._keys.account_link(provider, _external_id(external_id)))

    async def accounts_of(self, user_id: str) -> list[tuple[Provider, str]]:
        """The external accounts linked to a user, sorted."""
        members = cast(set[str], await self._redis.smembers(self._keys.user_accounts(user_id)))
        pairs = (member.split(":", 1) for member in members)
        return sorted((Provider(provider), external_id) for provider, external_id in pairs)

    async def profile(self, user_id: str) -> UserProfile:
        raw = cast(dict[str, str], await self._redis.hgetall(self._keys.user(user_id)))
        return UserProfile.from_hash(user_id, raw)

    def queue_profile(self, pipe: Pipeline, user_id: str) -> None:
        pipe.hgetall(self._keys.user(user_id))

    async def save_profile(self, profile: UserProfile) -> None:
        await self._redis.hset(self._keys.user(profile.user_id), mapping=profile.to_hash())  # type: ignore[arg-type]

    async def identity(self, user_id: str) -> UserIdentity | None:
        raw = cast(dict[str, str], await self._redis.hgetall(self._keys.user_identity(user_id)))
        return UserIdentity.from_hash(user_id, raw)

    async def for_run(self, user_id: str | None, repository: str | None) -> RunAccounts:
        """The user's profile and identity, the team defaults and the repository's settings,
        read in one round trip (they do not depend on each other)."""
        async with self._redis.pipeline(transaction=False) as pipe:
            self.queue_team(pipe)
            if user_id:
                self.queue_profile(pipe, user_id)
                pipe.hgetall(self._keys.user_identity(user_id))
            if repository:
                self.queue_repository(pipe, repository)
            replies = list(await pipe.execute())
        team = TeamDefaults.from_json(cast(str | None, replies.pop(0)))
        profile = identity = None
        if user_id:
            profile = UserProfile.from_hash(user_id, cast(dict[str, str], replies.pop(0)))
            identity = UserIdentity.from_hash(user_id, cast(dict[str, str], replies.pop(0)))
        settings = RepositorySettings.from_json(cast(str | None, replies.pop(0))) if repository else None
        return RunAccounts(profile=profile, identity=identity, team=team, repository=settings)

    async def identities(self, user_ids: list[str]) -> dict[str, UserIdentity]:
        """The identities of those of ``user_ids`` that signed in to the dashboard."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for user_id in user_ids:
                pipe.hgetall(self._keys.user_identity(user_id))
            raws = cast(list[dict[str, str]], await pipe.execute())
        found = (UserIdentity.from_hash(user_id, raw) for user_id, raw in zip(user_ids, raws, strict=True))
        return {identity.user_id: identity for identity in found if identity is not None}

    async def save_identity(self, identity: UserIdentity) -> None:
        await self._redis.hset(self._keys.user_identity(identity.user_id), mapping=identity.to_hash())  # type: ignore[arg-type]

    async def team(self) -> TeamDefaults:
        return TeamDefaults.from_json(cast(str | None, await self._redis.get(self._keys.team())))

    def queue_team(self, pipe: Queue) -> None:
        pipe.get(self._keys.team())

    async def save_team(self, team: TeamDefaults) -> None:
        await self._redis.set(self._keys.team(), team.model_dump_json())

    async def repository(self, full_name: str) -> RepositorySettings | None:
        """The repository's settings; ``None`` when it is not enabled."""
        key = self._keys.repository(self.host, repository_name(full_name))
        return RepositorySettings.from_json(cast(str | None, await self._redis.get(key)))

    def queue_repository(self, pipe: Queue, full_name: str) -> None:
        pipe.get(self._keys.repository(self.host, repository_name(full_name)))

    async def save_repository(self, settings: RepositorySettings) -> None:
        """Enable the repository with these toggles (or change them)."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(self._keys.repository(self.host, settings.full_name), settings.model_dump_json())
            pipe.sadd(self._keys.repositories(), settings.full_name.lower())
            await pipe.execute()

    async def remove_repository(self, full_name: str) -> bool:
        """Disable the repository; False if it was not enabled."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(self._keys.repository(self.host, repository_name(full_name)))
            pipe.srem(self._keys.repositories(), full_name.lower())
            deleted, _ = await pipe.execute()
        return bool(deleted)

    async def repositories(self) -> list[RepositorySettings]:
        """Every enabled repository, sorted by name."""
        names = sorted(cast(set[str], await self._redis.smembers(self._keys.repositories())))
        async with self._redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.get(self._keys.repository(self.host, name))
            raws = cast(list[str | None], await pipe.execute())
        found = (RepositorySettings.from_json(raw) for raw in raws)
        return [settings for settings in found if settings is not None]
