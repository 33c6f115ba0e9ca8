"""API writes while a gate applies (plan approval, an autofix repair's confidence): every write
waits but the few the agent's tools make, which change no code."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from drydock.accounts import AccountsStore
from drydock.accounts.records import RepositorySettings
from drydock.autofix.policy import Kind
from drydock.autofix.repairs import Repair, Repairs
from drydock.credentials import ProxyCredentials
from drydock.infra.redis import Keys
from drydock.roles import Role
from tests.credentials.conftest import REPOSITORY
from tests.credentials.sandbox_side import handle_for
from tests.fakes.github import FakeGithub

COMMIT_ON_BRANCH = (
    'mutation { createCommitOnBranch(input: {branch: {repositoryNameWithOwner: "acme/widgets", branchName: "main"}, '
    'expectedHeadOid: "0000000000000000000000000000000000000000", message: {headline: "x"}, '
    'fileChanges: {additions: [{path: "a.txt", contents: "eA=="}]}}) { commit { oid } } }'
)
BRANCH_MOVING: list[tuple[str, str, dict[str, Any]]] = [
    ("PUT", f"/repos/{REPOSITORY}/contents/README.md", {"message": "x", "content": "eA=="}),
    ("POST", "/graphql", {"query": COMMIT_ON_BRANCH}),
    ("POST", "/graphql", {"query": 'mutation { updateRef(input: {refId: "R", oid: "0"}) { clientMutationId } }'}),
    (
        "POST",
        "/graphql",
        {"query": 'mutation M { m: mergePullRequest(input: {pullRequestId: "P"}) { clientMutationId } }'},
    ),
    ("POST", "/graphql", {"query": "query { viewer { login } } mutation { ...F } fragment F on Mutation { x }"}),
    ("PUT", f"/repos/{REPOSITORY}/pulls/1/merge", {"merge_method": "merge"}),
    ("POST", f"/repos/{REPOSITORY}/branches/main/rename", {"new_name": "old-main"}),
    ("POST", f"/repos/{REPOSITORY}/merge-upstream", {"branch": "main"}),
    ("PUT", "/repositories/1/contents/README.md", {"message": "x", "content": "eA=="}),
    ("PATCH", "/repositories/1/git/refs/heads/main", {"sha": "0" * 40, "force": True}),
]
RESOLVE_THREAD = """
mutation ResolveReviewThread($threadId: ID!) {
  resolveReviewThread(input: {threadId: $threadId}) { thread { id isResolved } }
}
"""
TOOLS_WRITES: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", f"/repos/{REPOSITORY}/issues/1/comments", {"body": "working on it"}),
    ("POST", f"/repos/{REPOSITORY}/issues/comments/5/reactions", {"content": "eyes"}),
    ("POST", f"/repos/{REPOSITORY}/pulls", {"title": "t", "head": "drydock/x", "base": "main"}),
    ("PATCH", f"/repos/{REPOSITORY}/pulls/1", {"title": "t2"}),
    ("POST", f"/repos/{REPOSITORY}/pulls/1/reviews", {"event": "COMMENT", "body": "b"}),
    ("POST", f"/repos/{REPOSITORY}/check-runs", {"name": "drydock", "head_sha": "a" * 40}),
    ("POST", "/graphql", {"query": RESOLVE_THREAD, "variables": {"threadId": "T"}}),
    ("POST", "/graphql", {"query": "query { viewer { login } }"}),
]


@pytest.fixture
async def plan_required(redis: Redis, keys: Keys) -> AsyncIterator[None]:
    accounts = AccountsStore(redis, keys, host="github.com")
    await accounts.save_repository(RepositorySettings(full_name=REPOSITORY, plan_approval=True, protected_paths=()))
    yield
    await accounts.remove_repository(REPOSITORY)


Send = Callable[[str, str, dict[str, Any]], Awaitable[tuple[httpx.Response, list[str]]]]


@pytest.fixture
async def send(credentials: ProxyCredentials, github: FakeGithub, tmp_path: Path, thread_id: str) -> Send:
    """Send a request with the thread's coder grant: the proxy's answer and the paths of what
    reached the double."""
    grant = await credentials.issue(
        handle_for(thread_id, tmp_path), thread_id=thread_id, role=Role.CODER, repository=REPOSITORY
    )

    async def sending(method: str, path: str, body: dict[str, Any]) -> tuple[httpx.Response, list[str]]:
        before = len(github.requests)
        async with httpx.AsyncClient(base_url=str(grant.api_base_url), trust_env=False) as client:
            response = await client.request(method, path, json=body)
        return response, [seen.path for seen in github.requests[before:]]

    return sending


async def _open_repair(redis: Redis, keys: Keys, thread_id: str) -> None:
    repair = Repair("repair-1", thread_id, "github.com", REPOSITORY, 1, "a" * 40, Kind.CI, 0.7, datetime.now(UTC))
    await Repairs(redis, keys).open(repair, max_repairs=3, ttl=timedelta(minutes=5))


@pytest.mark.usefixtures("plan_required")
class TestUnderPlanApproval:
    @pytest.mark.parametrize(("method", "path", "body"), BRANCH_MOVING)
    async def test_a_write_that_can_change_code_is_refused(
        self,
        send: Send,
        method: str,
        path: str,
        body: dict[str, Any],
    ) -> None:
        response, reached = await send(method, path, body)
        assert response.status_code == 403, response.text
        assert response.json()["message"].startswith("drydock credential proxy: ")
        assert reached == []

    @pytest.mark.parametrize(("method", "path", "body"), TOOLS_WRITES)
    async def test_the_tools_writes_go_through(
        self,
        send: Send,
        method: str,
        path: str,
        body: dict[str, Any],
    ) -> None:
        response, reached = await send(method, path, body)
        assert "drydock credential proxy" not in response.text
        assert reached == [path]


class TestDuringARepair:
    @pytest.mark.parametrize(("method", "path", "body"), BRANCH_MOVING[1:4])
    async def test_a_graphql_mutation_waits_for_the_confidence(
        self,
        send: Send,
        redis: Redis,
        keys: Keys,
        thread_id: str,
        method: str,
        path: str,
        body: dict[str, Any],
    ) -> None:
        await _open_repair(redis, keys, thread_id)
        response, reached = await send(method, path, body)
        assert response.status_code == 403
        assert "autofix repair" in response.json()["message"]
        assert reached == []


class TestRepositoryIds:
    async def test_a_repository_named_by_id_is_refused_without_a_gate(self, send: Send) -> None:
        response, reached = await send("GET", "/repositories/1", {})
        assert response.status_code == 403
        assert "/repos/{owner}/{name}" in response.json()["message"]
        assert reached == []


FILE_WRITES: list[tuple[str, str, dict[str, Any]]] = [
    ("PUT", f"/repos/{REPOSITORY}/contents/.github/workflows/evil.yml", {"message": "x", "content": "eA=="}),
    ("POST", f"/repos/{REPOSITORY}/git/trees", {"tree": [{"path": ".github/workflows/evil.yml", "mode": "100644"}]}),
    ("PATCH", f"/repos/{REPOSITORY}/git/refs/heads/main", {"sha": "0" * 40}),
    ("POST", f"/repos/{REPOSITORY}//git/commits", {"message": "x", "tree": "0" * 40}),
    ("POST", "/graphql", {"query": COMMIT_ON_BRANCH}),
]


class TestProtectedPaths:
    @pytest.mark.parametrize(("method", "path", "body"), FILE_WRITES)
    async def test_a_write_of_files_is_refused_so_that_a_push_can_be_held(
        self,
        send: Send,
        method: str,
        path: str,
        body: dict[str, Any],
    ) -> None:
        response, reached = await send(method, path, body)
        assert response.status_code == 403
        assert "push with git instead" in response.json()["message"]
        assert reached == []

    async def test_without_protected_paths_a_write_of_files_goes_through(
        self,
        send: Send,
        redis: Redis,
        keys: Keys,
    ) -> None:
        accounts = AccountsStore(redis, keys, host="github.com")
        await accounts.save_repository(RepositorySettings(full_name=REPOSITORY, protected_paths=()))
        method, path, body = FILE_WRITES[0]
        response, reached = await send(method, path, body)
        assert "drydock credential proxy" not in response.text
        assert reached == [path]

    async def test_a_graphql_query_goes_through(self, send: Send) -> None:
        response, reached = await send("POST", "/graphql", {"query": "{ viewer { login } }"})
        assert "drydock credential proxy" not in response.text
        assert reached == ["/graphql"]
