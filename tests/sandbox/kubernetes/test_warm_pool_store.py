"""The warm pool's Redis state against a real Valkey: reservations never exceed the size and no
two claimers ever get the same sandbox, however many run at once."""

from __future__ import annotations

import asyncio
import time

import pytest
from redis.asyncio import Redis

from drydock.infra.redis import Keys
from drydock.sandbox.providers.kubernetes.warm_pool_store import WarmPoolStore


@pytest.fixture
def store(redis: Redis, keys: Keys) -> WarmPoolStore:
    return WarmPoolStore(redis, keys, "sandboxes")


def record(sandbox_id: str) -> dict[str, str]:
    return {"id": sandbox_id, "token": f"token-of-{sandbox_id}"}


async def fill(store: WarmPoolStore, count: int) -> list[str]:
    ids = [f"sbx-{index}" for index in range(count)]
    for sandbox_id in ids:
        assert await store.reserve(sandbox_id, size=count, now=time.time())
        assert await store.ready(sandbox_id, record(sandbox_id), now=time.time())
    return ids


class TestReserve:
    async def test_concurrent_reservations_never_exceed_the_size(self, store: WarmPoolStore) -> None:
        results = await asyncio.gather(*(store.reserve(f"sbx-{i}", size=5, now=time.time()) for i in range(40)))
        assert results.count(True) == 5
        assert len(await store.members()) == 5

    async def test_claimed_sandboxes_no_longer_count_against_the_size(self, store: WarmPoolStore) -> None:
        await fill(store, 2)
        assert not await store.reserve("sbx-extra", size=2, now=time.time())
        assert await store.claim(now=time.time()) is not None
        assert await store.reserve("sbx-extra", size=2, now=time.time())

    async def test_ready_after_the_reservation_was_dropped_is_refused(self, store: WarmPoolStore) -> None:
        assert await store.reserve("sbx-1", size=1, now=time.time())
        assert await store.release("sbx-1")
        assert not await store.ready("sbx-1", record("sbx-1"), now=time.time())
        assert await store.claim(now=time.time()) is None


class TestClaim:
    async def test_no_two_claimers_get_the_same_sandbox(self, store: WarmPoolStore) -> None:
        ids = await fill(store, 10)
        claims = await asyncio.gather(*(store.claim(now=time.time()) for _ in range(60)))
        won = [claim for claim in claims if claim is not None]
        assert sorted(sandbox_id for sandbox_id, _ in won) == sorted(ids)
        assert all(handle == record(sandbox_id) for sandbox_id, handle in won)
        assert await store.idle_count() == 0

    async def test_claims_come_out_oldest_first_and_stay_members_until_completed(self, store: WarmPoolStore) -> None:
        await fill(store, 3)
        first = await store.claim(now=time.time())
        assert first is not None
        assert first[0] == "sbx-0"
        assert "sbx-0" in await store.members()
        await store.complete("sbx-0")
        assert await store.members() == {"sbx-1", "sbx-2"}

    async def test_a_released_idle_sandbox_is_never_claimed(self, store: WarmPoolStore) -> None:
        await fill(store, 2)
        await store.release("sbx-0")
        claimed = await store.claim(now=time.time())
        assert claimed is not None
        assert claimed[0] == "sbx-1"
        assert await store.claim(now=time.time()) is None

    async def test_a_starting_sandbox_is_not_claimable(self, store: WarmPoolStore) -> None:
        assert await store.reserve("sbx-1", size=1, now=time.time())
        assert await store.claim(now=time.time()) is None


class TestCleanUp:
    async def test_only_one_cleaner_drops_a_stale_start(self, store: WarmPoolStore) -> None:
        assert await store.reserve("sbx-old", size=2, now=100.0)
        assert await store.reserve("sbx-new", size=2, now=time.time())
        stale = await store.stale_starts(before=time.time() - 60)
        assert [sandbox_id for sandbox_id, _ in stale] == ["sbx-old"]
        drops = await asyncio.gather(*(store.drop_start(*stale[0]) for _ in range(5)))
        assert drops.count(True) == 1
        assert await store.members() == {"sbx-new"}

    async def test_only_one_cleaner_drops_a_stale_claim(self, store: WarmPoolStore) -> None:
        await fill(store, 2)
        assert await store.claim(now=100.0) is not None
        assert await store.claim(now=time.time()) is not None
        stale = await store.stale_claims(before=time.time() - 60)
        assert [sandbox_id for sandbox_id, _ in stale] == ["sbx-0"]
        drops = await asyncio.gather(*(store.drop_claim(*stale[0]) for _ in range(5)))
        assert drops.count(True) == 1
        assert await store.members() == {"sbx-1"}

    async def test_shrink_takes_idle_sandboxes_out_down_to_the_size(self, store: WarmPoolStore) -> None:
        await fill(store, 4)
        taken = [await store.shrink(2), await store.shrink(2), await store.shrink(2)]
        assert taken == ["sbx-0", "sbx-1", None]
        assert await store.members() == {"sbx-2", "sbx-3"}
