"""Reading the three layers of autofix enablement for a pull request: the owner's profile flag
(the thread's ``owner``), the repository's opt-in, and the per-PR override. The truth table is
:func:`drydock.autofix.policy.enablement`; the autofix monitor reads :meth:`Enablements.of`, and
the dashboard's thread page shows it for each of the thread's pull requests.
"""

from __future__ import annotations

from redis.asyncio import Redis

from drydock.accounts import AccountsStore, RepositorySettings, UserProfile
from drydock.autofix.overrides import AutofixOverrides, Override
from drydock.autofix.policy import Enablement, enablement
from drydock.infra.redis import Keys


class Enablements:
    def __init__(self, redis: Redis, keys: Keys, *, host: str) -> None:
        self._redis = redis
        self._accounts = AccountsStore(redis, keys, host=host)
        self._overrides = AutofixOverrides(redis, keys)

    async def of(self, owner: str | None, host: str, repository: str, number: int) -> Enablement:
        """Enablement for pull request ``number`` of ``repository`` whose thread belongs to ``owner``
        (one round trip)."""
        async with self._redis.pipeline(transaction=False) as pipe:
            self._accounts.queue_profile(pipe, owner or "-")
            self._accounts.queue_repository(pipe, repository)
            self._overrides.queue_get(pipe, host, repository, number)
            profile, settings, override = await pipe.execute()
        opted_in = RepositorySettings.from_json(settings)
        found = Override.from_hash(override)
        return enablement(
            user=bool(owner) and UserProfile.from_hash(owner or "-", profile).autofix,
            repository=opted_in is not None and opted_in.autofix,
            override=found.state if found is not None else None,
        )
