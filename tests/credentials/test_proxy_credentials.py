"""``ProxyCredentials``: the SandboxCredentials the lifecycle manager uses."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from nats.aio.client import Client as NatsClient
from redis.asyncio import Redis
from redis.asyncio.connection import Connection

from drydock.bus import Bus
from drydock.config import Settings
from drydock.credentials import (
    GrantExpired,
    GrantRevoked,
    GrantUnknown,
    NoApp,
    ProxyCredentials,
    TokenMintError,
    digest,
)
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.runtime import Runtime
from drydock.sandbox.credentials import GrantError, SandboxCredentials, SandboxGrant
from tests.credentials.conftest import REPOSITORY
from tests.credentials.sandbox_side import handle_for
from tests.fakes.github import FakeGithub


class TestIssue:
    async def test_implements_the_sandbox_protocol(self, credentials: ProxyCredentials) -> None:
        assert isinstance(credentials, SandboxCredentials)

    async def test_built_from_a_service_runtime(
        self, settings_for_sandboxes: Settings, nats_client: NatsClient, bus: Bus, redis: Redis, keys: Keys
    ) -> None:
        broker = ProxyCredentials.from_runtime(Runtime(settings_for_sandboxes, nats_client, bus, redis, keys))
        try:
            handle = handle_for("t-runtime", Path("/nonexistent"))
            grant = await broker.issue(handle, thread_id="t-runtime", role=Role.ANALYZER, repository=REPOSITORY)
            assert grant.token is not None
            assert (await broker.grants.resolve(grant.token)).read_only
        finally:
            await broker.aclose()

    async def test_grant_carries_placeholders_and_the_vault_the_encrypted_token(
        self,
        credentials: ProxyCredentials,
        redis: Redis,
        keys: Keys,
        github: FakeGithub,
        tmp_path: Path,
        thread_id: str,
    ) -> None:
        handle = handle_for(thread_id, tmp_path)
        grant = await credentials.issue(handle, thread_id=thread_id, role=Role.CODER, repository=REPOSITORY)
        assert grant.token is not None
        assert (grant.sandbox_id, grant.thread_id, grant.role, grant.repository) == (
            handle.id,
            thread_id,
            Role.CODER,
            REPOSITORY,
        )
        upstream = await credentials.vault.get(digest(grant.token))
        assert upstream is not None
        assert github.git_access(upstream.token, REPOSITORY) == "write"
        ciphertext = await redis.get(keys.grant_token(digest(grant.token)))
        assert ciphertext is not None
        assert upstream.token not in ciphertext
        handed_over = f"{grant!r} {dict(grant.environment)} {grant.git_config} {grant.api_base_url}"
        assert upstream.token not in handed_over
        assert grant.token in grant.api_base_url  # type: ignore[operator]

    async def test_reviewer_token_is_read_only_upstream_too(
        self, credentials: ProxyCredentials, github: FakeGithub, tmp_path: Path, thread_id: str
    ) -> None:
        grant = await credentials.issue(
            handle_for(thread_id, tmp_path), thread_id=thread_id, role=Role.REVIEWER, repository=REPOSITORY
        )
        assert grant.token is not None
        upstream = await credentials.vault.get(digest(grant.token))
        assert upstream is not None
        assert github.git_access(upstream.token, REPOSITORY) == "read"

    async def test_a_new_grant_supersedes_the_sandbox_s_earlier_one(
        self, credentials: ProxyCredentials, tmp_path: Path, thread_id: str
    ) -> None:
        handle = handle_for(thread_id, tmp_path)
        first = await credentials.issue(handle, thread_id=thread_id, role=Role.CODER, repository=REPOSITORY)
        second = await credentials.issue(handle, thread_id=thread_id, role=Role.CODER, repository=REPOSITORY)
        assert first.token is not None
        assert second.token is not None
        with pytest.raises(GrantRevoked, match="superseded"):
            await credentials.grants.resolve(first.token)
        assert await credentials.vault.get(digest(first.token)) is None
        assert (await credentials.grants.resolve(second.token)).sandbox_id == handle.id

    async def test_without_a_repository_there_is_a_grant_but_no_token(
        self, credentials: ProxyCredentials, tmp_path: Path, thread_id: str
    ) -> None:
        grant = await credentials.issue(
            handle_for(thread_id, tmp_path), thread_id=thread_id, role=Role.CODER, repository=None
        )
        assert grant.token is not None
        assert await credentials.vault.get(digest(grant.token)) is None
        assert (await credentials.grants.resolve(grant.token)).repository is None

    async def test_a_refused_mint_leaves_no_usable_grant(
        self, settings_for_sandboxes: Settings, redis: Redis, keys: Keys, tmp_path: Path, thread_id: str
    ) -> None:
        broker = ProxyCredentials.create(settings_for_sandboxes, redis, keys, minter=NoApp("no App in this test"))
        handle = handle_for(thread_id, tmp_path)
        with pytest.raises(TokenMintError, match="no App in this test"):
            await broker.issue(handle, thread_id=thread_id, role=Role.CODER, repository=REPOSITORY)
        assert await broker.grants.revoke_sandbox(thread_id, handle.id, reason="cleanup") == []

    async def test_a_malformed_repository_is_a_grant_error(
        self, credentials: ProxyCredentials, tmp_path: Path, thread_id: str
    ) -> None:
        with pytest.raises(GrantError, match="not an owner/name"):
            await credentials.issue(
                handle_for(thread_id, tmp_path), thread_id=thread_id, role=Role.CODER, repository="x"
            )


@pytest.fixture
async def grant(credentials: ProxyCredentials, tmp_path: Path, thread_id: str) -> SandboxGrant:
    """A coder's grant, issued by the test's ``credentials``."""
    return await credentials.issue(
        handle_for(thread_id, tmp_path), thread_id=thread_id, role=Role.CODER, repository=REPOSITORY
    )


class TestRefresh:
    @pytest.fixture
    async def credentials(
        self, settings_for_sandboxes: Settings, redis: Redis, keys: Keys
    ) -> AsyncIterator[ProxyCredentials]:
        """Credentials that extend every grant they refresh, however recently it was extended."""
        section = settings_for_sandboxes.proxy.model_copy(update={"grant_refresh_interval": timedelta(0)})
        broker = ProxyCredentials.create(settings_for_sandboxes.model_copy(update={"proxy": section}), redis, keys)
        yield broker
        await broker.aclose()

    async def test_extends_the_grant_and_mints_a_fresh_upstream_token(
        self, credentials: ProxyCredentials, grant: SandboxGrant, github: FakeGithub
    ) -> None:
        assert grant.token is not None
        before = await credentials.vault.get(digest(grant.token))
        expiry_before = (await credentials.grants.resolve(grant.token)).expires_at
        minted_before = len(github.state.tokens)
        await credentials.refresh(grant)
        after = await credentials.vault.get(digest(grant.token))
        assert before is not None
        assert after is not None
        assert after.token != before.token
        assert len(github.state.tokens) == minted_before + 1
        assert github.git_access(after.token, REPOSITORY) == "write"
        assert (await credentials.grants.resolve(grant.token)).expires_at >= expiry_before

    async def test_a_reviewer_refresh_mints_a_read_only_token(
        self, credentials: ProxyCredentials, github: FakeGithub, tmp_path: Path, thread_id: str
    ) -> None:
        grant = await credentials.issue(
            handle_for(thread_id, tmp_path), thread_id=thread_id, role=Role.REVIEWER, repository=REPOSITORY
        )
        assert grant.token is not None
        before = await credentials.vault.get(digest(grant.token))
        await credentials.refresh(grant)
        after = await credentials.vault.get(digest(grant.token))
        assert before is not None
        assert after is not None
        assert after.token != before.token
        assert github.git_access(after.token, REPOSITORY) == "read"

    async def test_the_proxy_keeps_a_live_token_between_refreshes(
        self, credentials: ProxyCredentials, grant: SandboxGrant, github: FakeGithub
    ) -> None:
        assert grant.token is not None
        minted_before = len(github.state.tokens)
        first = await credentials.upstream_token(*await credentials.resolve(grant.token))
        second = await credentials.upstream_token(*await credentials.resolve(grant.token))
        assert first == second
        assert len(github.state.tokens) == minted_before

    async def test_the_proxy_mints_anew_a_token_close_to_expiry(
        self, credentials: ProxyCredentials, grant: SandboxGrant
    ) -> None:
        assert grant.token is not None
        issued = await credentials.vault.get(digest(grant.token))
        assert issued is not None
        expiring = replace(issued, expires_at=datetime.now(UTC) + timedelta(minutes=1))
        await credentials.vault.put(digest(grant.token), expiring)
        after = await credentials.upstream_token(*await credentials.resolve(grant.token))
        assert after.token != issued.token
        assert not after.expires_within(timedelta(minutes=30))
        assert await credentials.vault.get(digest(grant.token)) == after

    async def test_a_revoked_grant_cannot_be_refreshed(
        self, credentials: ProxyCredentials, grant: SandboxGrant
    ) -> None:
        await credentials.revoke(grant)
        with pytest.raises(GrantError, match="revoked"):
            await credentials.refresh(grant)


class TestRefreshMomentsAfterAnExtension:
    """With the default ``grant_refresh_interval``, a grant issued or extended moments ago."""

    async def test_is_only_checked(
        self, credentials: ProxyCredentials, grant: SandboxGrant, github: FakeGithub
    ) -> None:
        assert grant.token is not None
        before = await credentials.vault.get(digest(grant.token))
        expiry_before = (await credentials.grants.resolve(grant.token)).expires_at
        minted_before = len(github.state.tokens)
        await credentials.refresh(grant)
        assert await credentials.vault.get(digest(grant.token)) == before
        assert len(github.state.tokens) == minted_before
        assert (await credentials.grants.resolve(grant.token)).expires_at == expiry_before

    async def test_a_revoked_one_is_still_refused(self, credentials: ProxyCredentials, grant: SandboxGrant) -> None:
        await credentials.revoke(grant)
        with pytest.raises(GrantError, match="revoked"):
            await credentials.refresh(grant)

    async def test_one_superseded_by_another_process_is_refused(
        self, credentials: ProxyCredentials, grant: SandboxGrant, tmp_path: Path, thread_id: str
    ) -> None:
        same_sandbox = replace(handle_for(thread_id, tmp_path), id=grant.sandbox_id)
        await credentials.issue(same_sandbox, thread_id=thread_id, role=Role.CODER, repository=REPOSITORY)
        with pytest.raises(GrantRevoked, match="superseded"):
            await credentials.refresh(grant)


class TestRevoke:
    async def test_withdraws_grant_and_token_and_is_idempotent(
        self, credentials: ProxyCredentials, tmp_path: Path, thread_id: str
    ) -> None:
        grant = await credentials.issue(
            handle_for(thread_id, tmp_path), thread_id=thread_id, role=Role.CODER, repository=REPOSITORY
        )
        assert grant.token is not None
        await credentials.revoke(grant)
        await credentials.revoke(grant)
        assert await credentials.vault.get(digest(grant.token)) is None
        with pytest.raises(GrantRevoked):
            await credentials.grants.resolve(grant.token)


class TestUpstreamToken:
    async def test_reuses_a_fresh_token_and_renews_one_about_to_expire(
        self, credentials: ProxyCredentials, tmp_path: Path, thread_id: str
    ) -> None:
        grant = await credentials.issue(
            handle_for(thread_id, tmp_path), thread_id=thread_id, role=Role.CODER, repository=REPOSITORY
        )
        assert grant.token is not None
        record = await credentials.grants.resolve(grant.token)
        stored = await credentials.vault.get(record.digest)
        assert stored is not None
        assert (await credentials.upstream_token(*await credentials.resolve(grant.token))).token == stored.token
        renewed = await credentials.upstream_token(
            *await credentials.resolve(grant.token), renew_margin=timedelta(hours=2)
        )
        assert renewed.token != stored.token
        assert (await credentials.vault.get(record.digest)) == renewed


class TestResolve:
    """What the proxy reads for each request it forwards: the grant and its stored token together."""

    async def test_the_grant_and_its_token_as_resolve_and_the_vault_give_them_in_one_round_trip(
        self, credentials: ProxyCredentials, grant: SandboxGrant, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        assert grant.token is not None
        expected = await credentials.grants.resolve(grant.token)
        stored = await credentials.vault.get(expected.digest)
        sends: list[object] = []
        real_send = Connection.send_packed_command

        async def counted(self: Connection, command: object, check_health: bool = True) -> None:
            sends.append(command)
            await real_send(self, command, check_health)  # type: ignore[arg-type]

        monkeypatch.setattr(Connection, "send_packed_command", counted)
        resolved, sealed = await credentials.resolve(grant.token)
        assert len(sends) == 1
        assert resolved == expected
        assert stored is not None
        assert sealed is not None
        assert stored.token not in sealed
        monkeypatch.undo()
        assert await credentials.upstream_token(resolved, sealed) == stored

    async def test_refuses_as_the_grant_store_does(
        self, credentials: ProxyCredentials, grant: SandboxGrant, redis: Redis, keys: Keys
    ) -> None:
        assert grant.token is not None
        for unknown in ("dgr_" + "x" * 43, "not-a-grant"):
            with pytest.raises(GrantUnknown):
                await credentials.resolve(unknown)
        forged = digest(grant.token)
        await redis.hset(keys.grant(forged), "repository", "other/repository")
        with pytest.raises(GrantUnknown):
            await credentials.resolve(grant.token)

    async def test_a_revoked_or_expired_grant_is_refused(
        self, credentials: ProxyCredentials, tmp_path: Path, thread_id: str
    ) -> None:
        handle = handle_for(thread_id, tmp_path)
        revoked = await credentials.issue(handle, thread_id=thread_id, role=Role.CODER, repository=REPOSITORY)
        assert revoked.token is not None
        await credentials.revoke(revoked)
        with pytest.raises(GrantRevoked):
            await credentials.resolve(revoked.token)
        issued = await credentials.grants.issue(
            role=Role.CODER,
            sandbox_id=handle.id,
            thread_id=thread_id,
            repository=REPOSITORY,
            ttl=timedelta(milliseconds=1),
        )
        await asyncio.sleep(0.01)
        with pytest.raises(GrantExpired):
            await credentials.resolve(issued.token)

    async def test_a_token_missing_or_about_to_expire_is_minted_anew(
        self, credentials: ProxyCredentials, grant: SandboxGrant
    ) -> None:
        assert grant.token is not None
        resolved, sealed = await credentials.resolve(grant.token)
        stored = credentials.vault.opened(sealed)
        assert stored is not None
        await credentials.vault.delete(resolved.digest)
        minted = await credentials.upstream_token(resolved, None)
        assert minted.token != stored.token
        assert await credentials.vault.get(resolved.digest) == minted
