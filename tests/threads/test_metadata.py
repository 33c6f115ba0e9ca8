from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from drydock.config import Settings
from drydock.infra.redis import Keys, connect_redis
from drydock.roles import Role
from drydock.threads import ThreadExists, ThreadMetadataStore, ThreadNotFound


@pytest.fixture
def store(redis: Redis, keys: Keys) -> ThreadMetadataStore:
    return ThreadMetadataStore(redis, keys)


class TestCreate:
    async def test_create_then_get(self, store: ThreadMetadataStore, thread_id: str) -> None:
        await store.create(thread_id, kind=Role.REVIEWER, fields={"repository": "acme/widgets"})
        assert await store.get(thread_id) == {"kind": "reviewer", "repository": "acme/widgets"}
        assert await store.kind(thread_id) is Role.REVIEWER

    async def test_create_twice_fails(self, store: ThreadMetadataStore, thread_id: str) -> None:
        await store.create(thread_id, kind=Role.CODER)
        with pytest.raises(ThreadExists):
            await store.create(thread_id, kind=Role.CODER)

    async def test_ensure_keeps_the_first_writer(self, store: ThreadMetadataStore, thread_id: str) -> None:
        first = await store.ensure(thread_id, kind=Role.CODER, fields={"owner": "ada"})
        second = await store.ensure(thread_id, kind=Role.CODER, fields={"owner": "bob"})
        assert first == second == {"kind": "coder", "owner": "ada"}

    async def test_missing_thread(self, store: ThreadMetadataStore, thread_id: str) -> None:
        assert await store.find(thread_id) is None
        with pytest.raises(ThreadNotFound):
            await store.get(thread_id)
        with pytest.raises(ThreadNotFound):
            await store.update(thread_id, lambda fields: {"x": "1"})
        with pytest.raises(ThreadNotFound):
            await store.compare_and_set(thread_id, "x", expected=None, new="1")


class TestUpdate:
    async def test_sets_and_deletes(self, store: ThreadMetadataStore, thread_id: str) -> None:
        await store.create(thread_id, kind=Role.CODER, fields={"a": "1", "b": "2"})
        result = await store.update(thread_id, lambda fields: {"a": None, "c": "3"})
        assert result == {"kind": "coder", "b": "2", "c": "3"}
        assert await store.get(thread_id) == result

    async def test_kind_never_changes(self, store: ThreadMetadataStore, thread_id: str) -> None:
        await store.create(thread_id, kind=Role.CODER)
        with pytest.raises(ValueError, match="kind"):
            await store.update(thread_id, lambda fields: {"kind": "reviewer"})
        with pytest.raises(ValueError, match="kind"):
            await store.compare_and_set(thread_id, "kind", expected="coder", new="reviewer")

    async def test_concurrent_writers_on_separate_connections_lose_nothing(
        self, settings: Settings, keys: Keys, thread_id: str
    ) -> None:
        writers = 8
        clients = [await connect_redis(settings.redis) for _ in range(writers)]
        try:
            stores = [ThreadMetadataStore(client, keys) for client in clients]
            await stores[0].create(thread_id, kind=Role.CODER, fields={"count": "0"})
            attempts = 0

            def increment(fields: dict[str, str]) -> dict[str, str | None]:
                nonlocal attempts
                attempts += 1
                return {"count": str(int(fields["count"]) + 1)}

            await asyncio.gather(*(store.update(thread_id, increment) for store in stores for _ in range(25)))
            assert (await stores[0].get(thread_id))["count"] == str(writers * 25)
            assert attempts > writers * 25, "the writers never conflicted, so retries were not exercised"
        finally:
            await asyncio.gather(*(client.aclose() for client in clients))


class TestCompareAndSet:
    async def test_absent_expected(self, store: ThreadMetadataStore, thread_id: str) -> None:
        await store.create(thread_id, kind=Role.CODER)
        assert await store.compare_and_set(thread_id, "sandbox_id", expected=None, new="creating")
        assert not await store.compare_and_set(thread_id, "sandbox_id", expected=None, new="other")
        assert (await store.get(thread_id))["sandbox_id"] == "creating"

    async def test_replace_and_delete(self, store: ThreadMetadataStore, thread_id: str) -> None:
        await store.create(thread_id, kind=Role.CODER, fields={"sandbox_id": "creating"})
        assert not await store.compare_and_set(thread_id, "sandbox_id", expected="wrong", new="sb-1")
        assert await store.compare_and_set(thread_id, "sandbox_id", expected="creating", new="sb-1")
        assert await store.compare_and_set(thread_id, "sandbox_id", expected="sb-1", new=None)
        assert "sandbox_id" not in await store.get(thread_id)

    async def test_empty_string_is_a_value_not_absence(self, store: ThreadMetadataStore, thread_id: str) -> None:
        await store.create(thread_id, kind=Role.CODER, fields={"note": ""})
        assert not await store.compare_and_set(thread_id, "note", expected=None, new="x")
        assert await store.compare_and_set(thread_id, "note", expected="", new="x")

    async def test_exactly_one_of_many_racers_wins(self, store: ThreadMetadataStore, thread_id: str) -> None:
        await store.create(thread_id, kind=Role.CODER)
        results = await asyncio.gather(
            *(store.compare_and_set(thread_id, "sandbox_id", expected=None, new=f"w{i}") for i in range(50))
        )
        assert sum(results) == 1
