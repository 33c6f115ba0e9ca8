"""Reading a receive-pack request's commands (:mod:`services.credential_proxy.push_inspection`):
the ref updates and capabilities, push options skipped, git's probe of a large push (a lone
flush), and malformed bodies or too many ref updates refused with a reason; through the proxy,
updates of refs to commits upstream already has, git that cannot start, and links over protected
paths."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import httpx
import pytest

from drydock.credentials import ProxyCredentials
from drydock.roles import Role
from services.credential_proxy.push_inspection import MAX_UPDATES, MalformedPush, parse_request
from services.credential_proxy.server import Listening
from tests.credentials.conftest import REPOSITORY
from tests.credentials.sandbox_side import apply_grant, handle_for
from tests.fakes.git_server import GitError, GitServer, git, isolated_git_env

OLD, NEW = "a" * 40, "b" * 40


def pkt(text: bytes) -> bytes:
    return f"{len(text) + 4:04x}".encode() + text


class TestParse:
    def test_commands_capabilities_and_the_pack(self) -> None:
        body = (
            pkt(f"{OLD} {NEW} refs/heads/x\0report-status side-band-64k\n".encode())
            + pkt(f"{'0' * 40} {NEW} refs/heads/y\n".encode())
            + b"0000PACK..."
        )
        push = parse_request(body)
        assert [(u.old, u.new, u.ref) for u in push.updates] == [
            (OLD, NEW, "refs/heads/x"),
            ("0" * 40, NEW, "refs/heads/y"),
        ]
        assert push.capabilities == {"report-status", "side-band-64k"}
        assert body[push.pack_offset :] == b"PACK..."

    def test_push_options_are_skipped(self) -> None:
        body = pkt(f"{OLD} {NEW} refs/heads/x\0push-options\n".encode()) + b"0000" + pkt(b"ci.skip\n") + b"0000PACK"
        assert body[parse_request(body).pack_offset :] == b"PACK"

    def test_the_probe_of_a_large_push_updates_nothing(self) -> None:
        assert parse_request(b"0000").updates == ()

    @pytest.mark.parametrize(
        ("body", "reason"),
        [
            (b"zzzz", "not pkt-lines"),
            (b"0010abc", "truncated"),
            (pkt(b"hello world\n") + b"0000", "not 'old new ref'"),
            (pkt(f"{OLD} nothex refs/heads/x\n".encode()) + b"0000", "not an object id"),
            (pkt(f"{OLD} {NEW} refs/heads/x\n".encode()), "ends inside"),
            (pkt(b"push-cert\0x\n") + b"0000", "signed pushes"),
        ],
    )
    def test_malformed_bodies_say_why(self, body: bytes, reason: str) -> None:
        with pytest.raises(MalformedPush, match=reason):
            parse_request(body)

    def test_more_ref_updates_than_the_limit_are_refused(self) -> None:
        lines = [pkt(f"{OLD} {NEW} refs/heads/b{n}\n".encode()) for n in range(MAX_UPDATES + 1)]
        assert len(parse_request(b"".join(lines[:MAX_UPDATES]) + b"0000").updates) == MAX_UPDATES
        with pytest.raises(MalformedPush, match=f"more than {MAX_UPDATES} refs"):
            parse_request(b"".join(lines) + b"0000")


class TestThroughTheProxy:
    @pytest.mark.parametrize(
        ("body", "headers", "reason"),
        [
            (b"garbage", {}, "not pkt-lines"),
            (b"\x1f\x8b\x08\x00broken", {"Content-Encoding": "gzip"}, "does not decode"),
        ],
    )
    async def test_a_malformed_push_is_400_and_never_forwarded(
        self,
        body: bytes,
        headers: dict[str, str],
        reason: str,
        proxy: Listening,
        credentials: ProxyCredentials,
        git_upstream: GitServer,
        tmp_path: Path,
        thread_id: str,
    ) -> None:
        grant = await credentials.issue(
            handle_for(thread_id, tmp_path), thread_id=thread_id, role=Role.CODER, repository=REPOSITORY
        )
        seen = len(git_upstream.requests)
        async with httpx.AsyncClient() as client:
            answer = await client.post(
                f"{proxy.url}/g/{grant.token}/git/{REPOSITORY}.git/git-receive-pack",
                content=body,
                headers={"Content-Type": "application/x-git-receive-pack-request", **headers},
            )
        assert answer.status_code == 400
        assert reason in answer.text
        assert git_upstream.requests[seen:] == []

    async def test_more_ref_updates_than_the_limit_are_400_and_never_forwarded(
        self, proxy: Listening, credentials: ProxyCredentials, git_upstream: GitServer, tmp_path: Path, thread_id: str
    ) -> None:
        grant = await credentials.issue(
            handle_for(thread_id, tmp_path), thread_id=thread_id, role=Role.CODER, repository=REPOSITORY
        )
        body = b"".join(pkt(f"{'0' * 40} {NEW} refs/heads/b{n}\n".encode()) for n in range(MAX_UPDATES + 1))
        seen = len(git_upstream.requests)
        async with httpx.AsyncClient() as client:
            answer = await client.post(
                f"{proxy.url}/g/{grant.token}/git/{REPOSITORY}.git/git-receive-pack", content=body + b"0000"
            )
        assert answer.status_code == 400
        assert f"more than {MAX_UPDATES} refs" in answer.text
        assert git_upstream.requests[seen:] == []

    async def test_git_that_cannot_start_is_502_and_never_forwarded(
        self,
        proxy: Listening,
        credentials: ProxyCredentials,
        git_upstream: GitServer,
        tmp_path: Path,
        thread_id: str,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        grant = await credentials.issue(
            handle_for(thread_id, tmp_path), thread_id=thread_id, role=Role.CODER, repository=REPOSITORY
        )
        monkeypatch.setenv("PATH", str(tmp_path))
        seen = len(git_upstream.requests)
        async with httpx.AsyncClient() as client:
            answer = await client.post(
                f"{proxy.url}/g/{grant.token}/git/{REPOSITORY}.git/git-receive-pack",
                content=pkt(f"{OLD} {NEW} refs/heads/x\n".encode()) + b"0000",
            )
        assert answer.status_code == 502
        assert "could not inspect" in answer.text
        assert git_upstream.requests[seen:] == []


class TestUpdatesToKnownCommits:
    """A ref moved to a commit upstream already has (on another branch) is seen by the tree
    difference of the update alone, annotated tags included."""

    @pytest.fixture
    async def refs(self, git_upstream: GitServer, tmp_path: Path) -> dict[str, tuple[str, str]]:
        """Each upstream ref made, by role, with its object id: a branch ``base`` at main, a branch
        ``workflow`` one commit ahead that adds a workflow, and annotated tags on each."""
        env = isolated_git_env(tmp_path)
        work = tmp_path / "work"
        suffix = uuid.uuid4().hex[:8]
        await git("clone", "-q", str(git_upstream.repository_path(REPOSITORY)), str(work), env=env)
        await git("branch", f"base-{suffix}", cwd=work, env=env)
        await git("tag", "-a", "-m", "base", f"base-{suffix}", cwd=work, env=env)
        (work / ".github" / "workflows").mkdir(parents=True)
        (work / ".github" / "workflows" / "x.yml").write_text("on: push\n")
        await git("add", "-A", cwd=work, env=env)
        await git("commit", "-q", "-m", "workflow", cwd=work, env=env)
        await git("branch", f"workflow-{suffix}", cwd=work, env=env)
        await git("tag", "-a", "-m", "workflow", f"workflow-{suffix}", cwd=work, env=env)
        refs = {
            "base": f"refs/heads/base-{suffix}",
            "workflow": f"refs/heads/workflow-{suffix}",
            "base-tag": f"refs/tags/base-{suffix}",
            "workflow-tag": f"refs/tags/workflow-{suffix}",
        }
        await git("push", "-q", "origin", *refs.values(), cwd=work, env=env)
        return {role: (ref, (await git("rev-parse", ref, cwd=work, env=env)).strip()) for role, ref in refs.items()}

    @pytest.mark.parametrize(("old", "new"), [("base", "workflow"), ("base-tag", "workflow-tag")])
    async def test_the_moved_ref_is_held(
        self,
        old: str,
        new: str,
        refs: dict[str, tuple[str, str]],
        proxy: Listening,
        credentials: ProxyCredentials,
        git_upstream: GitServer,
        tmp_path: Path,
        thread_id: str,
    ) -> None:
        grant = await credentials.issue(
            handle_for(thread_id, tmp_path), thread_id=thread_id, role=Role.CODER, repository=REPOSITORY
        )
        (ref, old_oid), (_, new_oid) = refs[old], refs[new]
        seen = len(git_upstream.requests)
        async with httpx.AsyncClient() as client:
            answer = await client.post(
                f"{proxy.url}/g/{grant.token}/git/{REPOSITORY}.git/git-receive-pack",
                content=pkt(f"{old_oid} {new_oid} {ref}\0report-status\n".encode()) + b"0000",
            )
        assert answer.status_code == 200
        assert b"held for the thread owner's approval" in answer.content
        assert [r.path for r in git_upstream.requests[seen:] if r.path.endswith("git-receive-pack")] == []


class TestLinks:
    """A symbolic link or a gitlink can put what an unprotected path holds where a protected path
    is read; a push adding one is held wherever it is, and a push of plain files is not."""

    async def push(self, credentials: ProxyCredentials, sandbox_home: Path, thread_id: str, change: str) -> str:
        grant = await credentials.issue(
            handle_for(thread_id, sandbox_home), thread_id=thread_id, role=Role.CODER, repository=REPOSITORY
        )
        env = await apply_grant(grant, sandbox_home)
        work = sandbox_home / "widgets"
        await git("clone", "-q", f"https://github.com/{REPOSITORY}.git", str(work), env=env)
        (work / "ci").mkdir()
        (work / "ci" / "evil.yml").write_text("on: push\n")
        if change == "symlink":
            (work / ".github").mkdir()
            os.symlink("../ci", work / ".github" / "workflows")
        await git("add", "-A", cwd=work, env=env)
        if change == "gitlink":
            head = (await git("rev-parse", "HEAD", cwd=work, env=env)).strip()
            await git("update-index", "--add", "--cacheinfo", f"160000,{head},.github/workflows", cwd=work, env=env)
        await git("commit", "-q", "-m", change, cwd=work, env=env)
        try:
            return await git(
                "push", "--porcelain", "origin", f"HEAD:refs/heads/links-{uuid.uuid4().hex[:8]}", cwd=work, env=env
            )
        except GitError as error:
            return str(error)

    @pytest.mark.parametrize("change", ["symlink", "gitlink"])
    async def test_a_link_over_a_protected_directory_is_held(
        self, change: str, proxy: Listening, credentials: ProxyCredentials, sandbox_home: Path, thread_id: str
    ) -> None:
        answer = await self.push(credentials, sandbox_home, thread_id, change)
        assert "changes protected paths: `.github/workflows`" in answer
        assert "Held until this thread's owner approves" in answer

    async def test_plain_files_outside_protected_paths_are_pushed(
        self, proxy: Listening, credentials: ProxyCredentials, sandbox_home: Path, thread_id: str
    ) -> None:
        answer = await self.push(credentials, sandbox_home, thread_id, "plain")
        assert "held" not in answer
        assert "[new branch]" in answer
