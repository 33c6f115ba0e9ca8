"""Grants: opaque, revocable tokens that let one sandbox use the credential proxy.

A grant names its role, sandbox, thread, repository scope and expiry. Redis stores only the
SHA-256 of the token (under :meth:`Keys.grant`), never the token itself, so a copy of Redis
grants nothing. A revoked or expired grant is remembered for ``retention`` so that its refusal
can say why.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import cast

from redis.asyncio import Redis

from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.sandbox.credentials import GrantError

TOKEN_PREFIX = "dgr_"
_TOKEN_SHAPE = re.compile(r"^dgr_[A-Za-z0-9_-]{43}$")

# ARGV: now (ms), revoked reason, forget-at (ms). 1: revoked now; 0: unknown or already revoked.
_REVOKE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HEXISTS', KEYS[1], 'revoked_at') == 1 then return 0 end
redis.call('HSET', KEYS[1], 'revoked_at', ARGV[1], 'revoked_reason', ARGV[2])
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
return 1
"""

# ARGV: now (ms), new expiry (ms), forget-at (ms). 1: extended; -1 unknown; -2 revoked; -3 expired.
_EXTEND = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HEXISTS', KEYS[1], 'revoked_at') == 1 then return -2 end
if tonumber(redis.call('HGET', KEYS[1], 'expires_at')) <= tonumber(ARGV[1]) then return -3 end
redis.call('HSET', KEYS[1], 'expires_at', ARGV[2])
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
return 1
"""


class GrantRejected(GrantError):
    """A grant that cannot be used; ``reason`` is the message shown to the sandbox."""

    reason = "grant rejected"

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(detail or self.reason)


class GrantUnknown(GrantRejected):
    reason = "unknown credential-proxy grant"


class GrantRevoked(GrantRejected):
    reason = "credential-proxy grant revoked"


class GrantExpired(GrantRejected):
    reason = "credential-proxy grant expired"


def digest(token: str) -> str:
    """The SHA-256 under which a grant token is stored; the token is random, so no salt is needed."""
    return hashlib.sha256(token.encode()).hexdigest()


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _moment(ms: str | int) -> datetime:
    return datetime.fromtimestamp(int(ms) // 1000, UTC).replace(microsecond=int(ms) % 1000 * 1000)


def _now() -> datetime:
    """Now, at the millisecond precision grants are stored with."""
    return _moment(_ms(datetime.now(UTC)))


@dataclass(frozen=True)
class Grant:
    """What a grant allows. ``read_only`` grants may clone, fetch and read, never push or write."""

    digest: str
    role: Role
    sandbox_id: str
    thread_id: str
    repository: str | None
    issued_at: datetime
    expires_at: datetime
    revoked_at: datetime | None = None
    revoked_reason: str | None = None

    @property
    def read_only(self) -> bool:
        return self.role is not Role.CODER

    def covers(self, repository: str) -> bool:
        """Whether ``owner/name`` is this grant's repository (case-insensitive, as on GitHub)."""
        return self.repository is not None and self.repository.lower() == repository.lower()


@dataclass(frozen=True)
class IssuedGrant:
    token: str = field(repr=False)
    grant: Grant


class GrantStore:
    """Issue, resolve, extend and revoke grants in Redis."""

    def __init__(self, redis: Redis, keys: Keys, *, retention: timedelta = timedelta(days=1)) -> None:
        self._redis = redis
        self._keys = keys
        self._retention = retention
        self._revoke = redis.register_script(_REVOKE)
        self._extend = redis.register_script(_EXTEND)

    async def issue(
        self, *, role: Role, sandbox_id: str, thread_id: str, repository: str | None, ttl: timedelta
    ) -> IssuedGrant:
        """A new grant for one sandbox, valid for ``ttl``."""
        if ttl <= timedelta(0):
            raise ValueError(f"a grant's ttl must be positive, not {ttl}")
        if repository is not None and not re.fullmatch(r"[\w.-]+/[\w.-]+", repository):
            raise ValueError(f"{repository!r} is not an owner/name repository")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        now = _now()
        grant = Grant(digest(token), role, sandbox_id, thread_id, repository, now, now + ttl)
        key = self._keys.grant(grant.digest)
        index = self._keys.sandbox_grants(thread_id, sandbox_id)
        forget_at = _ms(grant.expires_at + self._retention)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hset(
                key,
                mapping={
                    "role": role.value,
                    "sandbox_id": sandbox_id,
                    "thread_id": thread_id,
                    "repository": repository or "",
                    "issued_at": str(_ms(now)),
                    "expires_at": str(_ms(grant.expires_at)),
                },
            )
            pipe.pexpireat(key, forget_at)
            pipe.sadd(index, grant.digest)
            pipe.pexpireat(index, forget_at)
            await pipe.execute()
        return IssuedGrant(token, grant)

    async def get(self, token: str) -> Grant | None:
        """The grant's record whatever its state, or ``None`` if there is none."""
        if not _TOKEN_SHAPE.match(token):
            return None
        return await self.get_by_digest(digest(token))

    async def get_by_digest(self, grant_digest: str) -> Grant | None:
        record = cast(dict[str, str], await self._redis.hgetall(self._keys.grant(grant_digest)))
        if not record:
            return None
        return Grant(
            digest=grant_digest,
            role=Role(record["role"]),
            sandbox_id=record["sandbox_id"],
            thread_id=record["thread_id"],
            repository=record["repository"] or None,
            issued_at=_moment(record["issued_at"]),
            expires_at=_moment(record["expires_at"]),
            revoked_at=_moment(record["revoked_at"]) if "revoked_at" in record else None,
            revoked_reason=record.get("revoked_reason"),
        )

    async def resolve(self, token: str) -> Grant:
        """The live grant for ``token``; :class:`GrantUnknown`, :class:`GrantRevoked` or
        :class:`GrantExpired` otherwise, each with a message fit for the sandbox."""
        grant = await self.get(token)
        if grant is None:
            raise GrantUnknown()
        if grant.revoked_at is not None:
            raise GrantRevoked(
                f"{GrantRevoked.reason} ({grant.revoked_reason}) at {grant.revoked_at:%Y-%m-%dT%H:%M:%SZ}"
            )
        if grant.expires_at <= datetime.now(UTC):
            raise GrantExpired(f"{GrantExpired.reason} at {grant.expires_at:%Y-%m-%dT%H:%M:%SZ}")
        return grant

    async def extend(self, token: str, ttl: timedelta) -> datetime:
        """Move a live grant's expiry to ``ttl`` from now and return it; raise if it is not live."""
        now = _now()
        expires_at = _moment(_ms(now + ttl))
        result = await self._extend(
            keys=[self._keys.grant(digest(token))],
            args=[_ms(now), _ms(expires_at), _ms(expires_at + self._retention)],
        )
        if result == 1:
            return expires_at
        raise {-1: GrantUnknown, -2: GrantRevoked, -3: GrantExpired}[int(result)]()

    async def revoke(self, token: str, *, reason: str = "revoked") -> bool:
        """Revoke the grant; ``False`` if it was unknown or already revoked."""
        return await self.revoke_digest(digest(token), reason=reason)

    async def revoke_digest(self, grant_digest: str, *, reason: str = "revoked") -> bool:
        now = datetime.now(UTC)
        result = await self._revoke(
            keys=[self._keys.grant(grant_digest)], args=[_ms(now), reason, _ms(now + self._retention)]
        )
        return bool(result)

    async def revoke_sandbox(self, thread_id: str, sandbox_id: str, *, reason: str) -> list[str]:
        """Revoke every grant issued to one sandbox; return the digests that were live until now."""
        index = self._keys.sandbox_grants(thread_id, sandbox_id)
        members = cast(set[str], await self._redis.smembers(index))
        revoked = [d for d in members if await self.revoke_digest(d, reason=reason)]
        await self._redis.delete(index)
        return revoked
