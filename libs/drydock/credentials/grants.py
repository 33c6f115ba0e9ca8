"""Grants: opaque, revocable tokens that let one sandbox use the credential proxy.

A grant names its role, sandbox, thread, repository scope and expiry. Redis stores only the
SHA-256 of the token (under :meth:`Keys.grant`), never the token itself, so a copy of Redis
grants nothing. A revoked or expired grant is remembered for ``retention`` so that its refusal
can say why.

Every record carries a MAC (field ``mac``, :class:`~drydock.infra.server_keys.ServerKeys`,
purpose ``grant``) over its digest and all its fields, checked on every read: a record written
into Redis without the server key (a grant for a token of the writer's choosing) or with a
field changed (the role, the repository, the expiry, a revocation removed) is treated as
unknown. Lua cannot compute an HMAC, so extending and revoking read the record, verify it,
sign the new fields in Python and write them with a compare-and-set on the old MAC. What a MAC
cannot stop is a replay: someone who saved a record before its revocation can write it back
and use it until its expiry, if they also hold the token; grants are short-lived for that.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import structlog
from redis.asyncio import Redis

from drydock.infra.redis import Keys
from drydock.infra.server_keys import Purpose, ServerKeys
from drydock.roles import Role
from drydock.sandbox.credentials import GrantError

log = structlog.get_logger(__name__)

TOKEN_PREFIX = "dgr_"
_TOKEN_SHAPE = re.compile(r"^dgr_[A-Za-z0-9_-]{43}$")

# ARGV: the MAC the record must still have, forget-at (ms), then field/value pairs to set.
# 1: written; 0: the record changed (or vanished) since it was read.
_SWAP = """
if redis.call('HGET', KEYS[1], 'mac') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return 1
"""
_SWAP_ATTEMPTS = 5
"""Compare-and-set rounds before giving up; only a concurrent extend or revoke makes one fail."""
_FIELDS = ("role", "sandbox_id", "thread_id", "repository", "issued_at", "expires_at", "revoked_at", "revoked_reason")


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


def _live(grant: Grant | None) -> Grant:
    """``grant`` if it is live; :class:`GrantUnknown`, :class:`GrantRevoked` or
    :class:`GrantExpired` otherwise, each with a message fit for the sandbox."""
    if grant is None:
        raise GrantUnknown()
    if grant.revoked_at is not None:
        raise GrantRevoked(f"{GrantRevoked.reason} ({grant.revoked_reason}) at {grant.revoked_at:%Y-%m-%dT%H:%M:%SZ}")
    if grant.expires_at <= datetime.now(UTC):
        raise GrantExpired(f"{GrantExpired.reason} at {grant.expires_at:%Y-%m-%dT%H:%M:%SZ}")
    return grant


def _grant(grant_digest: str, record: Mapping[str, str]) -> Grant:
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
        """Whether ``owner/name`` is this grant's repository (ASCII case-insensitive, as on GitHub:
        Unicode's lowering would take the Kelvin sign U+212A for ``k``)."""
        return self.repository is not None and repository.isascii() and self.repository.lower() == repository.lower()


@dataclass(frozen=True)
class IssuedGrant:
    token: str = field(repr=False)
    grant: Grant


class GrantStore:
    """Issue, resolve, extend and revoke grants in Redis, each record signed with ``server_keys``."""

    def __init__(
        self, redis: Redis, keys: Keys, server_keys: ServerKeys, *, retention: timedelta = timedelta(days=1)
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._server_keys = server_keys
        self._retention = retention
        self._swap = redis.register_script(_SWAP)

    def _sign(self, grant_digest: str, record: Mapping[str, str]) -> str:
        return self._server_keys.sign(Purpose.GRANT, grant_digest, *(record.get(name) for name in _FIELDS))

    def _verified(self, grant_digest: str, record: Mapping[str, str]) -> bool:
        mac = record.get("mac")
        return mac is not None and self._server_keys.verify(
            Purpose.GRANT, mac, grant_digest, *(record.get(name) for name in _FIELDS)
        )

    async def _read(self, grant_digest: str) -> dict[str, str] | None:
        """The record if it is there and its MAC holds; a forged or altered one is ``None``."""
        record = cast(dict[str, str], await self._redis.hgetall(self._keys.grant(grant_digest)))
        return self._checked(grant_digest, record)

    def _checked(self, grant_digest: str, record: dict[str, str]) -> dict[str, str] | None:
        if not record:
            return None
        if not self._verified(grant_digest, record):
            log.warning("grant record fails its MAC; ignored", grant=grant_digest[:12])
            return None
        return record

    async def _rewrite(self, grant_digest: str, record: Mapping[str, str], changes: Mapping[str, str]) -> bool:
        """Set ``changes`` on the record read as ``record``, re-signed; ``False`` if it changed meanwhile."""
        updated = {**record, **changes}
        forget_at = _ms(_moment(updated["expires_at"]) + self._retention)
        if "revoked_at" in updated:
            forget_at = _ms(_moment(updated["revoked_at"]) + self._retention)
        pairs: list[str] = []
        for name, value in {**changes, "mac": self._sign(grant_digest, updated)}.items():
            pairs += [name, value]
        result = await self._swap(keys=[self._keys.grant(grant_digest)], args=[record["mac"], forget_at, *pairs])
        return bool(result)

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
        record: dict[Any, str] = {
            "role": role.value,
            "sandbox_id": sandbox_id,
            "thread_id": thread_id,
            "repository": repository or "",
            "issued_at": str(_ms(now)),
            "expires_at": str(_ms(grant.expires_at)),
        }
        record["mac"] = self._sign(grant.digest, record)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hset(key, mapping=record)
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
        """The grant stored under ``grant_digest``; ``None`` if there is none or its MAC fails."""
        record = await self._read(grant_digest)
        if record is None:
            return None
        return _grant(grant_digest, record)

    async def resolve(self, token: str) -> Grant:
        """The live grant for ``token``; :class:`GrantUnknown`, :class:`GrantRevoked` or
        :class:`GrantExpired` otherwise, each with a message fit for the sandbox."""
        return _live(await self.get(token))

    async def resolve_beside(self, token: str, key_of: Callable[[str], str]) -> tuple[Grant, str | None]:
        """:meth:`resolve`, and the string stored under ``key_of(digest)`` (the grant's upstream
        token), read in the same round trip."""
        if not _TOKEN_SHAPE.match(token):
            raise GrantUnknown()
        grant_digest = digest(token)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self._keys.grant(grant_digest))
            pipe.get(key_of(grant_digest))
            record, value = await pipe.execute()
        checked = self._checked(grant_digest, record)
        return _live(_grant(grant_digest, checked) if checked is not None else None), value

    async def extend(self, token: str, ttl: timedelta) -> datetime:
        """Move a live grant's expiry to ``ttl`` from now and return it; raise if it is not live."""
        grant_digest = digest(token)
        for _ in range(_SWAP_ATTEMPTS):
            record = await self._read(grant_digest) if _TOKEN_SHAPE.match(token) else None
            if record is None:
                raise GrantUnknown()
            if "revoked_at" in record:
                raise GrantRevoked()
            now = _now()
            if _moment(record["expires_at"]) <= now:
                raise GrantExpired()
            expires_at = _moment(_ms(now + ttl))
            if await self._rewrite(grant_digest, record, {"expires_at": str(_ms(expires_at))}):
                return expires_at
        raise GrantRejected("grant changed concurrently; try again")

    async def revoke(self, token: str, *, reason: str = "revoked") -> bool:
        """Revoke the grant; ``False`` if it was unknown or already revoked."""
        return await self.revoke_digest(digest(token), reason=reason)

    async def revoke_digest(self, grant_digest: str, *, reason: str = "revoked") -> bool:
        """Revoke the grant stored under ``grant_digest``; ``False`` if it was unknown (or fails
        its MAC) or already revoked."""
        for _ in range(_SWAP_ATTEMPTS):
            record = await self._read(grant_digest)
            if record is None or "revoked_at" in record:
                return False
            changes = {"revoked_at": str(_ms(_now())), "revoked_reason": reason}
            if await self._rewrite(grant_digest, record, changes):
                return True
        raise GrantRejected("grant changed concurrently; try again")

    async def revoke_sandbox(self, thread_id: str, sandbox_id: str, *, reason: str) -> list[str]:
        """Revoke every grant issued to one sandbox; return the digests that were live until now."""
        index = self._keys.sandbox_grants(thread_id, sandbox_id)
        members = cast(set[str], await self._redis.smembers(index))
        revoked = [d for d in members if await self.revoke_digest(d, reason=reason)]
        await self._redis.delete(index)
        return revoked
