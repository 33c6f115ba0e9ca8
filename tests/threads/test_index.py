"""The thread index on real Valkey: every created thread is listed, filters and visibility
narrow the list, pages continue without gaps or repeats, and old threads are backfilled."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from redis.asyncio import Redis

from drydock.infra.redis import Keys
from drydock.roles import Role
from drydock.threads.fields import CHANNEL, CREATED_AT, KIND, OWNER, REPOSITORY
from drydock.threads.index import InvalidCursor, ThreadIndex, ThreadPage, ThreadQuery, Visibility
from drydock.threads.metadata import ThreadExists, ThreadMetadataStore
from drydock.threads.states import ThreadState, ThreadStates

START = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture
def index(redis: Redis, keys: Keys) -> ThreadIndex:
    return ThreadIndex(redis, keys)


@pytest.fixture
def metadata(redis: Redis, keys: Keys) -> ThreadMetadataStore:
    return ThreadMetadataStore(redis, keys)


async def create(
    metadata: ThreadMetadataStore,
    *,
    minute: int,
    repository: str = "acme/widgets",
    channel: str = "github",
    owner: str = "",
    kind: Role = Role.CODER,
) -> str:
    thread_id = str(uuid.uuid4())
    created = (START + timedelta(minutes=minute)).isoformat()
    fields = {REPOSITORY: repository, CHANNEL: channel, OWNER: owner, CREATED_AT: created}
    await metadata.create(thread_id, kind=kind, fields=fields)
    return thread_id


async def everything(index: ThreadIndex, query: ThreadQuery) -> list[str]:
    found: list[str] = []
    cursor = None
    for _ in range(1000):
        page = await index.list(ThreadQuery(**{**query.__dict__, "cursor": cursor}))
        found += page.thread_ids
        cursor = page.next_cursor
        if cursor is None:
            return found
    raise AssertionError("the pages never ended")


class TestCreation:
    async def test_a_created_thread_is_listed_and_its_metadata_is_unchanged(
        self, index: ThreadIndex, metadata: ThreadMetadataStore, redis: Redis, keys: Keys
    ) -> None:
        thread_id = await create(metadata, minute=1)
        assert (await index.list(ThreadQuery())).thread_ids == [thread_id]
        assert set(await redis.hgetall(keys.thread(thread_id))) == {KIND, REPOSITORY, CHANNEL, OWNER, CREATED_AT}

    async def test_creating_twice_indexes_only_the_first(
        self, index: ThreadIndex, metadata: ThreadMetadataStore
    ) -> None:
        thread_id = str(uuid.uuid4())
        await metadata.create(thread_id, kind=Role.CODER, fields={REPOSITORY: "acme/a"})
        with pytest.raises(ThreadExists):
            await metadata.create(thread_id, kind=Role.CODER, fields={REPOSITORY: "acme/b"})
        assert (await index.list(ThreadQuery(repository="acme/a"))).thread_ids == [thread_id]
        assert (await index.list(ThreadQuery(repository="acme/b"))).thread_ids == []
        assert await index.count() == 1


class TestFilters:
    async def test_each_facet_filters_and_they_combine(self, index: ThreadIndex, metadata: ThreadMetadataStore) -> None:
        github = await create(metadata, minute=1, channel="github", owner="ada")
        slack = await create(metadata, minute=2, channel="slack", repository="acme/gadgets")
        review = await create(metadata, minute=3, kind=Role.REVIEWER)
        assert (await index.list(ThreadQuery(channel="slack"))).thread_ids == [slack]
        assert (await index.list(ThreadQuery(repository="ACME/Widgets"))).thread_ids == [review, github]
        assert (await index.list(ThreadQuery(owner="ada"))).thread_ids == [github]
        assert (await index.list(ThreadQuery(kind="reviewer"))).thread_ids == [review]
        assert (await index.list(ThreadQuery(repository="acme/widgets", kind="coder"))).thread_ids == [github]
        assert (await index.list(ThreadQuery(channel="linear"))).thread_ids == []

    async def test_the_state_facet_follows_state_changes(
        self, index: ThreadIndex, metadata: ThreadMetadataStore, redis: Redis, keys: Keys
    ) -> None:
        states = ThreadStates(redis, keys)
        first, second = await create(metadata, minute=1), await create(metadata, minute=2)
        await states.set(first, ThreadState.RUNNING)
        await states.set(second, ThreadState.RUNNING)
        await states.set(first, ThreadState.IDLE)
        assert (await index.list(ThreadQuery(state="running"))).thread_ids == [second]
        assert (await index.list(ThreadQuery(state="idle"))).thread_ids == [first]
        assert (await index.list(ThreadQuery(state="idle", repository="acme/widgets"))).thread_ids == [first]


class TestVisibility:
    async def test_a_reader_sees_their_own_threads_and_those_of_repositories_they_may_see(
        self, index: ThreadIndex, metadata: ThreadMetadataStore
    ) -> None:
        own = await create(metadata, minute=1, repository="acme/secret", owner="ada")
        visible = await create(metadata, minute=2, repository="acme/widgets")
        await create(metadata, minute=3, repository="acme/secret")
        reader = Visibility("ada", frozenset({"acme/widgets"}))
        assert (await index.list(ThreadQuery(visible_to=reader))).thread_ids == [visible, own]
        assert (await index.list(ThreadQuery(visible_to=Visibility("bob")))).thread_ids == []
        assert len((await index.list(ThreadQuery())).thread_ids) == 3


class TestPages:
    async def test_pages_continue_newest_first_without_gaps_or_repeats(
        self, index: ThreadIndex, metadata: ThreadMetadataStore
    ) -> None:
        # Several threads share a creation time, so the cursor must order within one score.
        created = [await create(metadata, minute=minute // 3) for minute in range(23)]
        listed = await everything(index, ThreadQuery(limit=4))
        assert sorted(listed) == sorted(created)
        assert len(listed) == len(set(listed))
        minutes = [created.index(thread_id) // 3 for thread_id in listed]
        assert minutes == sorted(minutes, reverse=True)

    async def test_a_full_last_page_has_no_cursor(self, index: ThreadIndex, metadata: ThreadMetadataStore) -> None:
        for minute in range(4):
            await create(metadata, minute=minute)
        first = await index.list(ThreadQuery(limit=2))
        second = await index.list(ThreadQuery(limit=2, cursor=first.next_cursor))
        assert len(second.thread_ids) == 2
        assert second.next_cursor is None

    async def test_a_bounded_scan_returns_a_short_page_and_continues(
        self, index: ThreadIndex, metadata: ThreadMetadataStore
    ) -> None:
        wanted = [await create(metadata, minute=minute, owner="ada" if minute % 5 == 0 else "") for minute in range(20)]
        query = ThreadQuery(visible_to=Visibility("ada"), limit=10, budget=3)
        first = await index.list(query)
        assert len(first.thread_ids) < 4
        assert first.next_cursor is not None
        assert await everything(index, query) == [wanted[15], wanted[10], wanted[5], wanted[0]]

    async def test_a_cursor_it_did_not_hand_out_is_refused(self, index: ThreadIndex) -> None:
        with pytest.raises(InvalidCursor):
            await index.list(ThreadQuery(cursor="not-a-cursor"))


class TestBackfill:
    async def test_threads_created_before_the_index_are_added_once(
        self, index: ThreadIndex, metadata: ThreadMetadataStore, redis: Redis, keys: Keys
    ) -> None:
        legacy = str(uuid.uuid4())
        await redis.hset(keys.thread(legacy), mapping={KIND: "coder", REPOSITORY: "acme/widgets"})
        assert await index.backfill(metadata.scan()) == 1
        assert (await index.list(ThreadQuery(repository="acme/widgets"))).thread_ids == [legacy]
        assert await index.backfill(metadata.scan()) == 0


class TestNarrowReaders:
    async def test_a_reader_who_sees_little_scans_only_what_they_may_see(
        self, index: ThreadIndex, metadata: ThreadMetadataStore, redis: Redis, keys: Keys
    ) -> None:
        for minute in range(40):
            await create(metadata, minute=minute, repository="acme/busy")
        mine = await create(metadata, minute=50, repository="acme/busy", owner="ada")
        visible = await create(metadata, minute=41, repository="acme/quiet")
        # A budget far below the 42 threads: only the union of what ada may see is scanned.
        query = ThreadQuery(visible_to=Visibility("ada", frozenset({"acme/quiet"})), budget=3)
        page = await index.list(query)
        assert page.thread_ids == [mine, visible]
        assert page.next_cursor is None
        assert not await redis.exists(keys.thread_scratch())

    async def test_a_repository_the_reader_may_not_see_scans_only_their_own_threads(
        self, index: ThreadIndex, metadata: ThreadMetadataStore
    ) -> None:
        for minute in range(40):
            await create(metadata, minute=minute, repository="acme/busy")
        mine = await create(metadata, minute=45, repository="acme/busy", owner="ada")
        await create(metadata, minute=46, repository="acme/other", owner="ada")
        await create(metadata, minute=47, repository="acme/quiet")
        # A budget far below the 40 threads of acme/busy: only ada's own threads are scanned.
        reader = Visibility("ada", frozenset({"acme/quiet"}))
        page = await index.list(ThreadQuery(repository="acme/Busy", visible_to=reader, budget=3))
        assert page == ThreadPage([mine], None)
        assert await index.list(ThreadQuery(repository="acme/busy", visible_to=Visibility("bob"), budget=3)) == (
            ThreadPage([], None)
        )

    async def test_a_reader_who_sees_nothing_gets_an_empty_page_at_once(
        self, index: ThreadIndex, metadata: ThreadMetadataStore
    ) -> None:
        for minute in range(10):
            await create(metadata, minute=minute)
        page = await index.list(ThreadQuery(visible_to=Visibility("nobody"), budget=1))
        assert page == ThreadPage([], None)
