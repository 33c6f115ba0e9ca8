from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from redis.asyncio import Redis

from drydock.credentials import Grant, GrantExpired, GrantRevoked, GrantStore, GrantUnknown, digest
from drydock.infra.redis import Keys
from drydock.infra.server_keys import ServerKeys
from drydock.roles import Role
from drydock.sandbox.credentials import GrantError


async def _everything_in(redis: Redis, keys: Keys) -> str:
    """Every key and value under the test's prefix, as one text to search."""
    dump = []
    async for key in redis.scan_iter(match=f"{keys.prefix}:*"):
        dump.append(key)
        kind = await redis.type(key)
        if kind == "hash":
            dump.append(str(await redis.hgetall(key)))
        elif kind == "set":
            dump.append(str(await redis.smembers(key)))
        else:
            dump.append(str(await redis.get(key)))
    return "\n".join(dump)


class TestIssue:
    async def test_stores_only_the_hash_of_the_token(
        self, redis: Redis, keys: Keys, server_keys: ServerKeys, thread_id: str
    ) -> None:
        store = GrantStore(redis, keys, server_keys)
        issued = await store.issue(
            role=Role.CODER, sandbox_id="s1", thread_id=thread_id, repository="acme/widgets", ttl=timedelta(hours=1)
        )
        stored = await _everything_in(redis, keys)
        assert issued.token not in stored
        assert digest(issued.token) in stored
        assert issued.token.startswith("dgr_")

    async def test_resolves_to_role_sandbox_thread_scope_and_expiry(
        self, redis: Redis, keys: Keys, server_keys: ServerKeys, thread_id: str
    ) -> None:
        store = GrantStore(redis, keys, server_keys)
        issued = await store.issue(
            role=Role.REVIEWER, sandbox_id="s1", thread_id=thread_id, repository="acme/widgets", ttl=timedelta(hours=1)
        )
        grant = await store.resolve(issued.token)
        assert grant == issued.grant
        assert (grant.role, grant.sandbox_id, grant.thread_id, grant.repository) == (
            Role.REVIEWER,
            "s1",
            thread_id,
            "acme/widgets",
        )
        assert grant.read_only
        assert grant.covers("ACME/Widgets")
        assert not grant.covers("acme/gadgets")
        assert abs(grant.expires_at - (datetime.now(UTC) + timedelta(hours=1))) < timedelta(seconds=5)

    async def test_bad_input_is_refused(
        self, redis: Redis, keys: Keys, server_keys: ServerKeys, thread_id: str
    ) -> None:
        store = GrantStore(redis, keys, server_keys)
        with pytest.raises(ValueError, match="not an owner/name"):
            await store.issue(role=Role.CODER, sandbox_id="s", thread_id=thread_id, repository="x", ttl=timedelta(1))
        with pytest.raises(ValueError, match="ttl must be positive"):
            await store.issue(role=Role.CODER, sandbox_id="s", thread_id=thread_id, repository=None, ttl=timedelta(0))


class TestCovers:
    def test_ascii_case_is_ignored_and_unicode_lookalikes_are_not(self) -> None:
        now = datetime.now(UTC)
        grant = Grant("d", Role.CODER, "s1", "t1", "acme/kit", now, now + timedelta(hours=1))
        assert grant.covers("ACME/Kit")
        assert not grant.covers("acme/\u212ait")  # KELVIN SIGN, which str.lower() makes "k"


class TestUnusable:
    async def test_unknown_and_malformed_tokens(self, redis: Redis, keys: Keys, server_keys: ServerKeys) -> None:
        store = GrantStore(redis, keys, server_keys)
        with pytest.raises(GrantUnknown, match="unknown credential-proxy grant"):
            await store.resolve("dgr_" + "A" * 43)
        with pytest.raises(GrantUnknown):
            await store.resolve("not even shaped like a grant")

    async def test_revoked(self, redis: Redis, keys: Keys, server_keys: ServerKeys, thread_id: str) -> None:
        store = GrantStore(redis, keys, server_keys)
        issued = await store.issue(
            role=Role.CODER, sandbox_id="s1", thread_id=thread_id, repository=None, ttl=timedelta(hours=1)
        )
        assert await store.revoke(issued.token)
        assert not await store.revoke(issued.token)
        with pytest.raises(GrantRevoked, match=r"grant revoked \(revoked\)"):
            await store.resolve(issued.token)
        with pytest.raises(GrantRevoked):
            await store.extend(issued.token, timedelta(hours=1))

    async def test_expired(self, redis: Redis, keys: Keys, server_keys: ServerKeys, thread_id: str) -> None:
        store = GrantStore(redis, keys, server_keys)
        issued = await store.issue(
            role=Role.CODER, sandbox_id="s1", thread_id=thread_id, repository=None, ttl=timedelta(milliseconds=50)
        )
        await asyncio.sleep(0.1)
        with pytest.raises(GrantExpired, match="grant expired at"):
            await store.resolve(issued.token)
        with pytest.raises(GrantExpired):
            await store.extend(issued.token, timedelta(hours=1))

    async def test_refusals_are_grant_errors_for_the_lifecycle_manager(self) -> None:
        assert issubclass(GrantUnknown, GrantError)
        assert issubclass(GrantRevoked, GrantError)
        assert issubclass(GrantExpired, GrantError)

    async def test_a_refused_grant_is_forgotten_after_the_retention(
        self, redis: Redis, keys: Keys, server_keys: ServerKeys, thread_id: str
    ) -> None:
        store = GrantStore(redis, keys, server_keys, retention=timedelta(minutes=5))
        issued = await store.issue(
            role=Role.CODER, sandbox_id="s1", thread_id=thread_id, repository=None, ttl=timedelta(hours=1)
        )
        await store.revoke(issued.token)
        ttl = await redis.pttl(keys.grant(digest(issued.token)))
        assert 4 * 60_000 < ttl <= 5 * 60_000


class TestExtend:
    async def test_moves_the_expiry(self, redis: Redis, keys: Keys, server_keys: ServerKeys, thread_id: str) -> None:
        store = GrantStore(redis, keys, server_keys)
        issued = await store.issue(
            role=Role.CODER, sandbox_id="s1", thread_id=thread_id, repository=None, ttl=timedelta(milliseconds=200)
        )
        new_expiry = await store.extend(issued.token, timedelta(hours=2))
        await asyncio.sleep(0.25)
        grant = await store.resolve(issued.token)
        assert grant.expires_at == new_expiry

    async def test_unknown(self, redis: Redis, keys: Keys, server_keys: ServerKeys) -> None:
        with pytest.raises(GrantUnknown):
            await GrantStore(redis, keys, server_keys).extend("dgr_" + "B" * 43, timedelta(hours=1))


class TestSandboxGrants:
    async def test_revoke_sandbox_revokes_every_live_grant_of_that_sandbox_only(
        self, redis: Redis, keys: Keys, server_keys: ServerKeys, thread_id: str
    ) -> None:
        store = GrantStore(redis, keys, server_keys)
        ttl = timedelta(hours=1)
        first = await store.issue(role=Role.CODER, sandbox_id="s1", thread_id=thread_id, repository=None, ttl=ttl)
        second = await store.issue(role=Role.CODER, sandbox_id="s1", thread_id=thread_id, repository=None, ttl=ttl)
        other = await store.issue(role=Role.CODER, sandbox_id="s2", thread_id=thread_id, repository=None, ttl=ttl)
        await store.revoke(first.token)

        revoked = await store.revoke_sandbox(thread_id, "s1", reason="superseded")
        assert revoked == [digest(second.token)]
        with pytest.raises(GrantRevoked, match="superseded"):
            await store.resolve(second.token)
        assert (await store.resolve(other.token)).sandbox_id == "s2"
