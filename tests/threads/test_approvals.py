"""The approvals store: plans and held pushes are signed (a record
written or altered without the server key is ignored), revisions are held again, an approval
of one push names that push only, and only the owner counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from cryptography.fernet import Fernet
from redis.asyncio import Redis

from drydock.infra.redis import Keys
from drydock.infra.server_keys import ServerKeys
from drydock.threads.approvals import Approvals, PushHold, RefUpdate, State, change_id, held_by, is_owner
from drydock.threads.metadata import ThreadMetadata

REPOSITORY = "acme/widgets"


@pytest.fixture
def approvals(redis: Redis, keys: Keys, server_keys: ServerKeys) -> Approvals:
    return Approvals(redis, keys, server_keys)


def hold_of(thread_id: str, new: str) -> PushHold:
    update = RefUpdate("a" * 40, new, "refs/heads/drydock/x")
    return PushHold(
        thread_id, change_id(REPOSITORY, [update]), REPOSITORY, (update,), (".github/workflows/ci.yml",), State.HELD,
        datetime.now(UTC),
    )  # fmt: skip


class TestWrittenAt:
    HELD = datetime(2026, 12, 7, 12, 0, 0, 700_000, tzinfo=UTC)

    @pytest.mark.parametrize(
        ("written_at", "approves"),
        [
            (None, True),
            (HELD + timedelta(minutes=1), True),
            # The same second, as GitHub gives it (whole seconds, truncated).
            (HELD.replace(microsecond=0), True),
            (HELD - timedelta(seconds=3), False),
            (HELD - timedelta(days=30), False),
        ],
    )
    def test_an_approval_covers_what_was_held_before_it_was_written(
        self, written_at: datetime | None, approves: bool
    ) -> None:
        assert held_by(self.HELD, written_at) is approves


class TestOwner:
    def test_the_owner_user_or_else_the_author_account(self) -> None:
        owned = ThreadMetadata.parse("t", {"kind": "coder", "owner": "u1", "author": "slack:U1"})
        authored = ThreadMetadata.parse("t", {"kind": "coder", "owner": "", "author": "github:42"})
        assert is_owner(owned, user_id="u1")
        assert not is_owner(owned, user_id="u2", author="slack:U1")
        assert is_owner(authored, user_id=None, author="github:42")
        assert not is_owner(authored, user_id="u1", author="github:7")
        assert not is_owner(None, user_id=None, author=None)
        assert not is_owner(ThreadMetadata.parse("t", {"kind": "coder"}), user_id=None, author=None)


class TestPlans:
    async def test_a_revision_is_held_again(self, approvals: Approvals, thread_id: str) -> None:
        await approvals.submit_plan(thread_id, "one", [{"content": "a"}])
        approved = await approvals.approve_plan(thread_id, by="u1")
        assert approved is not None
        assert approved.approved
        assert await approvals.approve_plan(thread_id, by="u1") is None
        revised = await approvals.submit_plan(thread_id, "two", [{"content": "b"}])
        assert (revised.revision, revised.approved) == (2, False)

    async def test_a_forged_approval_is_ignored(
        self, approvals: Approvals, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        await approvals.submit_plan(thread_id, "one", [{"content": "a"}])
        await redis.hset(keys.thread_plan(thread_id), "state", "approved")
        assert await approvals.plan(thread_id) is None

    async def test_a_record_signed_with_another_key_is_ignored(
        self, redis: Redis, keys: Keys, thread_id: str, approvals: Approvals
    ) -> None:
        other = Approvals(redis, keys, ServerKeys([Fernet.generate_key().decode()]))
        await other.submit_plan(thread_id, "one", [{"content": "a"}])
        await other.approve_plan(thread_id, by="mallory")
        assert await approvals.plan(thread_id) is None


class TestHeldPushes:
    async def test_an_approval_names_one_exact_push(self, approvals: Approvals, thread_id: str) -> None:
        first, created = await approvals.hold(hold_of(thread_id, "b" * 40))
        assert created
        again, created = await approvals.hold(hold_of(thread_id, "b" * 40))
        assert (again.change, created) == (first.change, False)
        second, _ = await approvals.hold(hold_of(thread_id, "c" * 40))
        assert second.change != first.change
        approved = await approvals.approve(thread_id, by="u1", change=first.change)
        assert [hold.change for hold in approved.pushes] == [first.change]
        _, holds = await approvals.pending(thread_id)
        assert [hold.change for hold in holds] == [second.change]

    def test_the_change_id_covers_every_ref_update(self) -> None:
        one = RefUpdate("a" * 40, "b" * 40, "refs/heads/x")
        two = RefUpdate("0" * 40, "c" * 40, "refs/heads/y")
        assert change_id(REPOSITORY, [one, two]) == change_id(REPOSITORY, [two, one])
        assert change_id(REPOSITORY, [one]) != change_id(REPOSITORY, [one, two])
        assert change_id(REPOSITORY, [one]) != change_id("acme/other", [one])

    async def test_a_forged_hold_approval_is_ignored(
        self, approvals: Approvals, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        hold, _ = await approvals.hold(hold_of(thread_id, "d" * 40))
        await redis.hset(keys.push_hold(thread_id, hold.change), "state", "approved")
        assert await approvals.push(thread_id, hold.change) is None
