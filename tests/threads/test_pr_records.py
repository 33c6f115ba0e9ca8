"""The durable PR → thread record on real Valkey, and the branch-name short-id fallback."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from drydock.infra.redis import Keys
from drydock.threads import ids
from drydock.threads.pr_records import (
    PullRequestRecord,
    PullRequestState,
    PullRequestStore,
    branch_name,
    branch_short_id,
)


@pytest.fixture
def records(redis: Redis, keys: Keys) -> PullRequestStore:
    return PullRequestStore(redis, keys)


class TestBranchNames:
    def test_a_branch_carries_the_threads_short_id(self, thread_id: str) -> None:
        branch = branch_name(thread_id, "Fix: the *flaky* login test!")
        assert branch == f"drydock/{ids.short_id(thread_id)}-fix-the-flaky-login-test"
        assert branch_short_id(branch) == ids.short_id(thread_id)
        assert branch_short_id(f"refs/heads/{branch}") == ids.short_id(thread_id)
        assert branch_name(thread_id) == f"drydock/{ids.short_id(thread_id)}"

    @pytest.mark.parametrize("prefix", ["drydock/", "ada/", "team/ada/", "ada-"])
    def test_a_profiles_branch_prefix_keeps_the_short_id_readable(self, thread_id: str, prefix: str) -> None:
        branch = branch_name(thread_id, "speed up", prefix=prefix)
        assert branch == f"{prefix}{ids.short_id(thread_id)}-speed-up"
        assert branch_short_id(branch) == ids.short_id(thread_id)

    @pytest.mark.parametrize(
        "branch", ["main", "drydock/xyz", "drydock/0123456789abc", "fix/x0123456789ab", "0123456789ABC-x"]
    )
    def test_other_branches_carry_none(self, branch: str) -> None:
        assert branch_short_id(branch) is None


class TestRecords:
    async def test_record_and_find_by_number_and_branch(self, records: PullRequestStore, thread_id: str) -> None:
        branch = branch_name(thread_id, "speed")
        await records.record(PullRequestRecord("github.com", "Acme/Api", 12, thread_id, branch))
        assert await records.thread_for("github.com", "acme/api", 12) == thread_id
        assert await records.thread_for("github.com", "acme/api", 13) is None
        assert await records.thread_for_branch("github.com", "acme/api", f"refs/heads/{branch}") == thread_id
        found = await records.find("github.com", "acme/api", 12)
        assert found is not None
        assert (found.branch, found.state, found.thread_id) == (branch, PullRequestState.OPEN, thread_id)

    async def test_the_short_id_finds_a_thread_without_a_record(
        self, records: PullRequestStore, thread_id: str
    ) -> None:
        branch = branch_name(thread_id, "new work")
        assert await records.thread_for_branch("github.com", "acme/api", branch) is None
        await records.remember_thread(thread_id)
        assert await records.thread_for_branch("github.com", "acme/api", branch) == thread_id

    async def test_open_records_follow_the_state(self, records: PullRequestStore, thread_id: str) -> None:
        await records.record(PullRequestRecord("github.com", "acme/api", 1, thread_id, "drydock/a"))
        await records.record(PullRequestRecord("github.com", "acme/web", 2, thread_id, "drydock/b"))
        assert [(r.repository, r.number) for r in await records.open_records()] == [("acme/api", 1), ("acme/web", 2)]
        assert await records.set_state("github.com", "acme/api", 1, PullRequestState.MERGED) is True
        assert await records.set_state("github.com", "acme/api", 99, PullRequestState.CLOSED) is False
        assert [r.number for r in await records.open_records()] == [2]
        assert [r.number for r in await records.of_thread(thread_id)] == [1, 2]
