"""Grants written or changed in Redis without the server's key grant nothing: the test holds the
store, as if it had leaked, and real git through the credential proxy is refused."""

from __future__ import annotations

import secrets
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from redis.asyncio import Redis

from drydock.credentials import ProxyCredentials, digest
from drydock.credentials.grants import TOKEN_PREFIX
from drydock.infra.redis import Keys
from drydock.infra.server_keys import Purpose, ServerKeys
from drydock.roles import Role
from drydock.sandbox.credentials import SandboxGrant
from tests.credentials.conftest import REPOSITORY
from tests.credentials.sandbox_side import apply_grant, handle_for
from tests.fakes.git_server import GitError, GitServer, git

CLONE_URL = f"https://github.com/{REPOSITORY}.git"
FIELDS = ("role", "sandbox_id", "thread_id", "repository", "issued_at", "expires_at", "revoked_at", "revoked_reason")


def _ms(moment: datetime) -> str:
    return str(int(moment.timestamp() * 1000))


def _with_token(grant: SandboxGrant, token: str) -> SandboxGrant:
    """``grant``'s configuration, pointed at ``token`` instead (what a sandbox can write itself)."""
    assert grant.token is not None
    config = [(key.replace(grant.token, token), value.replace(grant.token, token)) for key, value in grant.git_config]
    environment = {name: value.replace(grant.token, token) for name, value in grant.environment.items()}
    return replace(grant, token=token, git_config=config, environment=environment)


async def _push(home: Path, env: dict[str, str], branch: str) -> None:
    work = home / "widgets"
    await git("clone", "-q", CLONE_URL, str(work), env=env)
    (work / "forged.txt").write_text("pushed with a forged grant\n")
    await git("add", "forged.txt", cwd=work, env=env)
    await git("commit", "-q", "-m", "forged", cwd=work, env=env)
    await git("push", "origin", f"HEAD:refs/heads/{branch}", cwd=work, env=env)


class TestForgedGrantsThroughTheProxy:
    async def test_a_coder_grant_written_straight_into_redis_is_refused(
        self, credentials: ProxyCredentials, redis: Redis, keys: Keys, sandbox_home: Path, thread_id: str
    ) -> None:
        reviewer = await credentials.issue(
            handle_for(thread_id, sandbox_home), thread_id=thread_id, role=Role.REVIEWER, repository=REPOSITORY
        )
        assert reviewer.token is not None
        chosen = TOKEN_PREFIX + secrets.token_urlsafe(32)
        now = datetime.now(UTC)
        record: dict[Any, str] = {
            "role": Role.CODER.value,
            "sandbox_id": reviewer.sandbox_id,
            "thread_id": thread_id,
            "repository": REPOSITORY,
            "issued_at": _ms(now),
            "expires_at": _ms(now + timedelta(hours=1)),
        }
        # Signed too, with a key of the forger's own: only Drydock's verifies.
        forger = ServerKeys([Fernet.generate_key().decode()])
        record["mac"] = forger.sign(Purpose.GRANT, digest(chosen), *(record.get(name, "") for name in FIELDS))
        await redis.hset(keys.grant(digest(chosen)), mapping=record)
        env = await apply_grant(_with_token(reviewer, chosen), sandbox_home)
        with pytest.raises(GitError, match="unknown credential-proxy grant") as refused:
            await _push(sandbox_home, env, "forged")
        assert "403" in str(refused.value)

    async def test_a_reviewer_grant_whose_role_was_set_to_coder_cannot_push(
        self,
        credentials: ProxyCredentials,
        git_upstream: GitServer,
        redis: Redis,
        keys: Keys,
        sandbox_home: Path,
        thread_id: str,
    ) -> None:
        reviewer = await credentials.issue(
            handle_for(thread_id, sandbox_home), thread_id=thread_id, role=Role.REVIEWER, repository=REPOSITORY
        )
        assert reviewer.token is not None
        env = await apply_grant(reviewer, sandbox_home)
        await git("ls-remote", CLONE_URL, env=env)
        await redis.hset(keys.grant(digest(reviewer.token)), "role", Role.CODER.value)
        seen_before = len(git_upstream.requests)
        with pytest.raises(GitError, match="unknown credential-proxy grant"):
            await _push(sandbox_home, env, "escalated")
        assert git_upstream.requests[seen_before:] == []


class TestTamperedRecords:
    @pytest.fixture
    async def issued(self, credentials: ProxyCredentials, thread_id: str, sandbox_home: Path) -> SandboxGrant:
        return await credentials.issue(
            handle_for(thread_id, sandbox_home), thread_id=thread_id, role=Role.REVIEWER, repository=REPOSITORY
        )

    async def test_a_pushed_out_expiry_is_refused(
        self, credentials: ProxyCredentials, issued: SandboxGrant, redis: Redis, keys: Keys
    ) -> None:
        assert issued.token is not None
        later = _ms(datetime.now(UTC) + timedelta(days=365))
        await redis.hset(keys.grant(digest(issued.token)), "expires_at", later)
        assert await credentials.grants.get(issued.token) is None

    async def test_a_removed_revocation_is_refused(
        self, credentials: ProxyCredentials, issued: SandboxGrant, redis: Redis, keys: Keys
    ) -> None:
        assert issued.token is not None
        await credentials.revoke(issued)
        await redis.hdel(keys.grant(digest(issued.token)), "revoked_at", "revoked_reason")
        assert await credentials.grants.get(issued.token) is None

    async def test_an_emptied_revocation_field_is_refused(
        self, credentials: ProxyCredentials, issued: SandboxGrant, redis: Redis, keys: Keys
    ) -> None:
        assert issued.token is not None
        # An absent field and an empty one are signed differently.
        await redis.hset(keys.grant(digest(issued.token)), "revoked_at", "")
        assert await credentials.grants.get(issued.token) is None

    async def test_another_repository_is_refused(
        self, credentials: ProxyCredentials, issued: SandboxGrant, redis: Redis, keys: Keys
    ) -> None:
        assert issued.token is not None
        await redis.hset(keys.grant(digest(issued.token)), "repository", "acme/gadgets")
        assert await credentials.grants.get(issued.token) is None

    async def test_extend_and_revoke_keep_the_record_valid(
        self, credentials: ProxyCredentials, issued: SandboxGrant
    ) -> None:
        assert issued.token is not None
        before = await credentials.grants.resolve(issued.token)
        extended = await credentials.grants.extend(issued.token, timedelta(hours=2))
        assert (await credentials.grants.resolve(issued.token)).expires_at == extended > before.expires_at
        assert await credentials.grants.revoke(issued.token, reason="done")
        revoked = await credentials.grants.get(issued.token)
        assert revoked is not None
        assert revoked.revoked_reason == "done"

    async def test_a_grant_signed_before_a_rotation_still_verifies(
        self, credentials: ProxyCredentials, issued: SandboxGrant, redis: Redis, keys: Keys, crypto_key: str
    ) -> None:
        from drydock.credentials import GrantStore

        assert issued.token is not None
        rotated = GrantStore(redis, keys, ServerKeys([Fernet.generate_key().decode(), crypto_key]))
        assert (await rotated.resolve(issued.token)).role is Role.REVIEWER
        await rotated.extend(issued.token, timedelta(hours=1))
        assert (await rotated.resolve(issued.token)).role is Role.REVIEWER
