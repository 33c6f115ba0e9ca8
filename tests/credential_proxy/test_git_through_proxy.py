"""Real ``git clone``/``git push`` through the credential proxy to a real ``git http-backend``
that accepts only live installation tokens from the fake GitHub."""

from __future__ import annotations

import asyncio
import os
import uuid
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis

from drydock.bus import Bus, EventType, RunEvent
from drydock.bus.streams import EVENTS_STREAM
from drydock.config import Settings
from drydock.credentials import ProxyCredentials, digest
from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.sandbox.credentials import SandboxGrant
from services.credential_proxy.server import Listening
from tests.credentials.conftest import OTHER_REPOSITORY, REPOSITORY
from tests.credentials.sandbox_side import apply_grant, handle_for, occurrences
from tests.fakes.git_server import GitError, GitServer, git
from tests.fakes.github import App, FakeGithub

CLONE_URL = f"https://github.com/{REPOSITORY}.git"


async def _issue(credentials: ProxyCredentials, thread_id: str, home: Path, role: Role) -> SandboxGrant:
    return await credentials.issue(handle_for(thread_id, home), thread_id=thread_id, role=role, repository=REPOSITORY)


class TestCoderGrant:
    async def test_clone_and_push_work_through_the_proxy(
        self,
        credentials: ProxyCredentials,
        git_upstream: GitServer,
        sandbox_home: Path,
        thread_id: str,
    ) -> None:
        grant = await _issue(credentials, thread_id, sandbox_home, Role.CODER)
        env = await apply_grant(grant, sandbox_home)
        work = sandbox_home / "widgets"
        await git("clone", "-q", CLONE_URL, str(work), env=env)
        assert (work / "README.md").read_text() == "# widgets\n"

        (work / "CHANGELOG.md").write_text("pushed through the proxy\n")
        await git("add", "CHANGELOG.md", cwd=work, env=env)
        await git("commit", "-q", "-m", "through the proxy", cwd=work, env=env)
        await git("push", "-q", "origin", "HEAD:refs/heads/feature", cwd=work, env=env)

        bare = git_upstream.repository_path(REPOSITORY)
        upstream_log = await git("--git-dir", str(bare), "log", "-1", "--format=%s", "feature", env=env)
        assert upstream_log.strip() == "through the proxy"

    async def test_a_large_push_streams_through(
        self,
        credentials: ProxyCredentials,
        git_upstream: GitServer,
        sandbox_home: Path,
        thread_id: str,
    ) -> None:
        grant = await _issue(credentials, thread_id, sandbox_home, Role.CODER)
        env = await apply_grant(grant, sandbox_home)
        work = sandbox_home / "widgets"
        await git("clone", "-q", CLONE_URL, str(work), env=env)
        # Above git's 1 MiB http.postBuffer the pack goes up with chunked transfer encoding.
        (work / "large.bin").write_bytes(os.urandom(3 << 20))
        await git("add", "large.bin", cwd=work, env=env)
        await git("commit", "-q", "-m", "large", cwd=work, env=env)
        await git("push", "-q", "origin", "HEAD:refs/heads/large", cwd=work, env=env)
        bare = git_upstream.repository_path(REPOSITORY)
        size = await git("--git-dir", str(bare), "cat-file", "-s", "large:large.bin", env=env)
        assert int(size) == 3 << 20

    async def test_upstream_sees_the_installation_token_never_the_grant(
        self,
        credentials: ProxyCredentials,
        git_upstream: GitServer,
        github: FakeGithub,
        sandbox_home: Path,
        thread_id: str,
    ) -> None:
        grant = await _issue(credentials, thread_id, sandbox_home, Role.CODER)
        assert grant.token is not None
        env = await apply_grant(grant, sandbox_home)
        seen_before = len(git_upstream.requests)
        await git("clone", "-q", CLONE_URL, str(sandbox_home / "widgets"), env=env)

        upstream_token = await credentials.vault.get(digest(grant.token))
        assert upstream_token is not None
        seen = git_upstream.requests[seen_before:]
        assert seen, "the clone never reached the upstream"
        assert {request.token for request in seen} == {upstream_token.token}
        assert github.git_access(upstream_token.token, REPOSITORY) == "write"
        assert all(grant.token not in request.path for request in seen)

    async def test_the_real_token_appears_nowhere_in_the_sandbox(
        self, credentials: ProxyCredentials, sandbox_home: Path, thread_id: str
    ) -> None:
        grant = await _issue(credentials, thread_id, sandbox_home, Role.CODER)
        assert grant.token is not None
        env = await apply_grant(grant, sandbox_home)
        work = sandbox_home / "widgets"
        await git("clone", "-q", CLONE_URL, str(work), env=env)
        await git("fetch", "-q", "origin", cwd=work, env=env)
        config = await git("config", "--global", "--list", env=env)
        remote_config = await git("config", "--list", cwd=work, env=env)

        upstream_token = await credentials.vault.get(digest(grant.token))
        assert upstream_token is not None
        texts = [config, remote_config, repr(grant), str(dict(grant.environment)), str(grant.git_config)]
        assert occurrences(upstream_token.token, sandbox_home, env, texts) == []
        # The same search does find what the sandbox is meant to hold: the grant, in its git config.
        assert str(sandbox_home / ".gitconfig") in occurrences(grant.token, sandbox_home, env, [])
        assert grant.environment["GH_TOKEN"] == "proxy-injected"

    async def test_another_repository_is_refused(
        self, credentials: ProxyCredentials, sandbox_home: Path, thread_id: str
    ) -> None:
        grant = await _issue(credentials, thread_id, sandbox_home, Role.CODER)
        env = await apply_grant(grant, sandbox_home)
        with pytest.raises(GitError, match=f"this grant covers {REPOSITORY} only"):
            await git("clone", "-q", f"https://github.com/{OTHER_REPOSITORY}.git", str(sandbox_home / "x"), env=env)


class TestReviewerGrant:
    async def test_clone_and_fetch_work(
        self, credentials: ProxyCredentials, sandbox_home: Path, thread_id: str
    ) -> None:
        grant = await _issue(credentials, thread_id, sandbox_home, Role.REVIEWER)
        env = await apply_grant(grant, sandbox_home)
        work = sandbox_home / "widgets"
        await git("clone", "-q", CLONE_URL, str(work), env=env)
        await git("fetch", "-q", "origin", cwd=work, env=env)
        assert (work / "src" / "app.py").exists()

    async def test_push_is_refused_and_recorded_on_the_thread(
        self,
        credentials: ProxyCredentials,
        git_upstream: GitServer,
        bus: Bus,
        sandbox_home: Path,
        thread_id: str,
    ) -> None:
        grant = await _issue(credentials, thread_id, sandbox_home, Role.REVIEWER)
        env = await apply_grant(grant, sandbox_home)
        work = sandbox_home / "widgets"
        await git("clone", "-q", CLONE_URL, str(work), env=env)
        (work / "evil.txt").write_text("a reviewer must not push\n")
        await git("add", "evil.txt", cwd=work, env=env)
        await git("commit", "-q", "-m", "should not land", cwd=work, env=env)
        seen_before = len(git_upstream.requests)

        with pytest.raises(GitError, match="push refused: the reviewer grant is read-only") as refused:
            await git("push", "origin", "HEAD:refs/heads/evil", cwd=work, env=env)
        assert "403" in str(refused.value)
        assert not any("receive-pack" in request.path for request in git_upstream.requests[seen_before:])

        stored = await bus.js.get_last_msg(EVENTS_STREAM, f"drydock.event.{thread_id}.{EventType.PROXY_DENIED}")
        assert stored.data is not None
        event = RunEvent.model_validate_json(stored.data)
        assert event.type is EventType.PROXY_DENIED
        assert event.data["reason"] == "read_only"
        assert event.data["role"] == "reviewer"
        assert event.data["sandbox_id"] == grant.sandbox_id
        assert event.data["target"] == f"{REPOSITORY}/info/refs"


class TestUnusableGrants:
    async def test_revoked_grant_is_refused(
        self, credentials: ProxyCredentials, sandbox_home: Path, thread_id: str
    ) -> None:
        grant = await _issue(credentials, thread_id, sandbox_home, Role.CODER)
        env = await apply_grant(grant, sandbox_home)
        await credentials.revoke(grant)
        with pytest.raises(GitError, match="credential-proxy grant revoked") as refused:
            await git("clone", "-q", CLONE_URL, str(sandbox_home / "widgets"), env=env)
        assert "403" in str(refused.value)

    async def test_expired_grant_is_refused(
        self, settings_for_sandboxes: Settings, redis: Redis, keys: Keys, sandbox_home: Path, thread_id: str
    ) -> None:
        short = settings_for_sandboxes.proxy.model_copy(update={"grant_ttl": timedelta(milliseconds=300)})
        broker = ProxyCredentials.create(settings_for_sandboxes.model_copy(update={"proxy": short}), redis, keys)
        try:
            grant = await _issue(broker, thread_id, sandbox_home, Role.CODER)
            env = await apply_grant(grant, sandbox_home)
            await git("ls-remote", CLONE_URL, env=env)
            await asyncio.sleep(0.4)
            with pytest.raises(GitError, match="credential-proxy grant expired"):
                await git("ls-remote", CLONE_URL, env=env)
        finally:
            await broker.aclose()

    async def test_unknown_grant_is_refused(
        self, credentials: ProxyCredentials, sandbox_home: Path, thread_id: str
    ) -> None:
        grant = await _issue(credentials, thread_id, sandbox_home, Role.CODER)
        assert grant.token is not None
        forged = grant.token[:-4] + ("AAAA" if not grant.token.endswith("AAAA") else "BBBB")
        forged_config = [(key.replace(grant.token, forged), value) for key, value in grant.git_config]
        env = await apply_grant(
            SandboxGrant(
                sandbox_id=grant.sandbox_id,
                thread_id=thread_id,
                role=Role.CODER,
                repository=REPOSITORY,
                token=forged,
                environment=grant.environment,
                git_config=forged_config,
            ),
            sandbox_home,
        )
        with pytest.raises(GitError, match="unknown credential-proxy grant"):
            await git("ls-remote", CLONE_URL, env=env)


class TestMethods:
    @pytest.mark.parametrize(
        ("method", "endpoint", "allowed"),
        [
            ("PUT", "git-receive-pack", "POST"),
            ("PATCH", "git-receive-pack", "POST"),
            ("GET", "git-receive-pack", "POST"),
            ("PUT", "git-upload-pack", "POST"),
            ("POST", "info/refs?service=git-upload-pack", "GET"),
        ],
    )
    async def test_a_method_git_never_sends_is_405_and_never_forwarded(
        self,
        proxy: Listening,
        credentials: ProxyCredentials,
        git_upstream: GitServer,
        sandbox_home: Path,
        thread_id: str,
        method: str,
        endpoint: str,
        allowed: str,
    ) -> None:
        grant = await _issue(credentials, thread_id, sandbox_home, Role.CODER)
        command = f"{'0' * 40} {'1' * 40} refs/heads/other-method\0report-status\n".encode()
        seen = len(git_upstream.requests)
        async with httpx.AsyncClient() as client:
            answer = await client.request(
                method,
                f"{proxy.url}/g/{grant.token}/git/{REPOSITORY}.git/{endpoint}",
                content=f"{len(command) + 4:04x}".encode() + command + b"0000",
            )
        assert git_upstream.requests[seen:] == []
        assert answer.status_code == 405
        assert answer.headers["Allow"] == allowed


class TestServiceParameter:
    async def test_a_repeated_service_is_400_and_never_forwarded(
        self,
        proxy: Listening,
        credentials: ProxyCredentials,
        git_upstream: GitServer,
        sandbox_home: Path,
        thread_id: str,
    ) -> None:
        grant = await _issue(credentials, thread_id, sandbox_home, Role.REVIEWER)
        seen = len(git_upstream.requests)
        async with httpx.AsyncClient() as client:
            answer = await client.get(
                f"{proxy.url}/g/{grant.token}/git/{REPOSITORY}.git/info/refs",
                params=[("service", "git-upload-pack"), ("service", "git-receive-pack")],
            )
        assert git_upstream.requests[seen:] == []
        assert answer.status_code == 400
        assert "service parameter once" in answer.text


class TestRepositoryName:
    @pytest.mark.parametrize(
        ("method", "endpoint"), [("GET", "info/refs?service=git-upload-pack"), ("POST", "git-receive-pack")]
    )
    async def test_a_unicode_lookalike_of_the_grant_s_repository_is_403_and_never_forwarded(
        self,
        proxy: Listening,
        github: FakeGithub,
        github_app: App,
        credentials: ProxyCredentials,
        git_upstream: GitServer,
        sandbox_home: Path,
        thread_id: str,
        method: str,
        endpoint: str,
    ) -> None:
        owner = f"k{uuid.uuid4().hex[:8]}"
        github.install(github_app, owner, ["widgets"])
        grant = await credentials.issue(
            handle_for(thread_id, sandbox_home), thread_id=thread_id, role=Role.CODER, repository=f"{owner}/widgets"
        )
        command = f"{'0' * 40} {'1' * 40} refs/heads/x\0report-status\n".encode()
        seen = len(git_upstream.requests)
        async with httpx.AsyncClient() as client:
            answer = await client.request(
                method,
                f"{proxy.url}/g/{grant.token}/git/%E2%84%AA{owner[1:]}/widgets.git/{endpoint}",  # KELVIN SIGN for k
                content=f"{len(command) + 4:04x}".encode() + command + b"0000" if method == "POST" else None,
            )
        assert git_upstream.requests[seen:] == []
        assert answer.status_code == 403
        assert "is not a repository name" in answer.text
