"""Per-PR autofix overrides: a person turned autofix on or off for one pull request, with a
comment (``@drydock autofix on|off``), a label, or the dashboard. Stored durably in Redis, one
hash per pull request; the dashboard reads and writes them through :class:`AutofixOverrides`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import cast

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from drydock.autofix.policy import OverrideState
from drydock.infra.redis import Keys

# ARGV: the source the override must have been set by.
_CLEAR_IF_SOURCE = """
if redis.call('HGET', KEYS[1], 'source') == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class OverrideSource(StrEnum):
    COMMENT = "comment"
    LABEL = "label"
    DASHBOARD = "dashboard"


@dataclass(frozen=True)
class Override:
    state: OverrideState
    by: str
    """Who set it: a GitHub login, or a Drydock user id from the dashboard."""
    source: OverrideSource
    at: datetime

    def to_hash(self) -> dict[str, str]:
        return {"state": self.state.value, "by": self.by, "source": self.source.value, "at": self.at.isoformat()}

    @classmethod
    def from_hash(cls, raw: dict[str, str]) -> Override | None:
        if not raw.get("state"):
            return None
        return cls(
            OverrideState(raw["state"]),
            raw.get("by", ""),
            OverrideSource(raw.get("source", OverrideSource.DASHBOARD.value)),
            datetime.fromisoformat(raw["at"]) if raw.get("at") else datetime.fromtimestamp(0, UTC),
        )


class AutofixOverrides:
    """The overrides of every pull request."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys
        self._clear_if_source = redis.register_script(_CLEAR_IF_SOURCE)

    async def get(self, host: str, repository: str, number: int) -> Override | None:
        raw = cast(dict[str, str], await self._redis.hgetall(self._keys.autofix_override(host, repository, number)))
        return Override.from_hash(raw)

    def queue_get(self, pipe: Pipeline, host: str, repository: str, number: int) -> None:
        """Queue :meth:`get` on a caller's pipeline; :meth:`Override.from_hash` decodes the reply."""
        pipe.hgetall(self._keys.autofix_override(host, repository, number))

    async def set(
        self, host: str, repository: str, number: int, state: OverrideState, *, by: str, source: OverrideSource
    ) -> Override:
        """Turn autofix on or off for the pull request, replacing any earlier override."""
        override = Override(state, by, source, datetime.now(UTC))
        key = self._keys.autofix_override(host, repository, number)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(key)
            pipe.hset(key, mapping=override.to_hash())  # type: ignore[arg-type]
            await pipe.execute()
        return override

    async def clear(self, host: str, repository: str, number: int, *, source: OverrideSource | None = None) -> bool:
        """Remove the override (only one set by ``source``, when given); False if none was removed.
        Without an override the owner's and the repository's settings decide again."""
        key = self._keys.autofix_override(host, repository, number)
        if source is None:
            return bool(await self._redis.delete(key))
        return bool(await self._clear_if_source(keys=[key], args=[source.value]))
