from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest
from redis.asyncio import Redis

from drydock.bus.envelopes import Author, Channel, InboxMessage, ReplyAddress
from drydock.config import Settings
from drydock.infra.redis import Batch, BatchConnections, Keys, connect_redis
from drydock.roles import Role
from drydock.threads import ThreadExists, ThreadMetadata, ThreadMetadataStore, ThreadNotFound
from drydock.threads.fields import ThreadState, new_thread_fields
from drydock.threads.metadata import KnownThread, UnreadableMetadata

ADDRESS = ReplyAddress(channel=Channel.SLACK, address={"team": "T1", "channel": "C1", "thread_ts": "1.2"})


@pytest.fixture
def store(redis: Redis, keys: Keys) -> ThreadMetadataStore:
    return ThreadMetadataStore(redis, keys)


def message(thread_id: str) -> InboxMessage:
    return InboxMessage(
        delivery_id="d1",
        thread_id=thread_id,
        channel=Channel.SLACK,
        author=Author(channel=Channel.SLACK, external_id="U1", name="ada", user_id="u-ada"),
        text="fix it",
        repository="acme/widgets",
        reply_to=ADDRESS,
    )


class TestCreate:
    async def test_create_then_get(self, store: ThreadMetadataStore, thread_id: str) -> None:
        await store.create(thread_id, kind=Role.REVIEWER, fields={"repository": "acme/widgets"})
        assert await store.get(thread_id) == ThreadMetadata(thread_id, Role.REVIEWER, repository="acme/widgets")

    async def test_create_twice_fails(self, store: ThreadMetadataStore, thread_id: str) -> None:
        await store.create(thread_id, kind=Role.CODER)
        with pytest.raises(ThreadExists):
            await store.create(thread_id, kind=Role.CODER)

    async def test_missing_thread(self, store: ThreadMetadataStore, thread_id: str) -> None:
        assert await store.find(thread_id) is None
        with pytest.raises(ThreadNotFound):
            await store.get(thread_id)
        with pytest.raises(ThreadNotFound):
            await store.update(thread_id, lambda thread: {"x": "1"})
        with pytest.raises(ThreadNotFound):
            await store.compare_and_set(thread_id, "x", expected=None, new="1")


class TestRecord:
    async def test_a_new_threads_fields_read_back_typed(self, store: ThreadMetadataStore, thread_id: str) -> None:
        await store.create(thread_id, kind=Role.CODER, fields=new_thread_fields(message(thread_id), created_by="test"))
        thread = await store.get(thread_id)
        assert (thread.kind, thread.channel, thread.reply_to) == (Role.CODER, Channel.SLACK, ADDRESS)
        assert (thread.repository, thread.owner, thread.author, thread.created_by) == (
            "acme/widgets", "u-ada", "slack:U1", "test",
        )  # fmt: skip
        assert thread.created_at is not None
        assert thread.created_at.tzinfo is UTC
        assert (thread.state, thread.sandbox_id, thread.model, thread.title) == (None, None, None, None)

    def test_empty_fields_read_as_none(self) -> None:
        thread = ThreadMetadata.parse("t", {"kind": "coder", "repository": "", "owner": "", "model": ""})
        assert (thread.repository, thread.owner, thread.model) == (None, None, None)

    def test_values_that_do_not_parse_read_as_none(self) -> None:
        thread = ThreadMetadata.parse(
            "t",
            {"kind": "coder", "reply_to": "{not json", "state": "dreaming", "channel": "fax", "created_at": "soon"},
        )
        assert (thread.reply_to, thread.state, thread.channel, thread.created_at) == (None, None, None, None)
        with pytest.raises(UnreadableMetadata, match="reply address"):
            thread.require_reply_to()

    def test_a_hash_without_a_known_kind_is_unreadable(self) -> None:
        with pytest.raises(UnreadableMetadata, match="kind"):
            ThreadMetadata.parse("t", {"repository": "acme/widgets"})
        with pytest.raises(UnreadableMetadata, match="kind"):
            ThreadMetadata.parse("t", {"kind": "poet"})

    def test_the_owner_or_without_one_the_author_owns_it(self) -> None:
        owned = ThreadMetadata.parse("t", {"kind": "coder", "owner": "u1", "author": "slack:U1"})
        assert owned.is_owned_by(user_id="u1")
        assert not owned.is_owned_by(user_id=None, author="slack:U1")
        authored = ThreadMetadata.parse("t", {"kind": "coder", "author": "github:42"})
        assert authored.is_owned_by(user_id="u1", author="github:42")
        assert not authored.is_owned_by(user_id="u1", author="github:7")


class TestReads:
    async def test_many_in_one_round_trip_leaving_out_missing_and_unreadable(
        self, store: ThreadMetadataStore, redis: Redis, keys: Keys
    ) -> None:
        one, two, missing, broken = (str(uuid.uuid4()) for _ in range(4))
        await store.create(one, kind=Role.CODER, fields={"repository": "acme/one"})
        await store.create(two, kind=Role.REVIEWER)
        await redis.hset(keys.thread(broken), "repository", "acme/broken")
        found = await store.find_many([one, missing, broken, two])
        assert list(found) == [one, two]
        assert (found[one].repository, found[two].kind) == ("acme/one", Role.REVIEWER)
        assert await store.find_many([]) == {}

    async def test_queued_in_a_pipeline(self, store: ThreadMetadataStore, redis: Redis, thread_id: str) -> None:
        await store.create(thread_id, kind=Role.CODER, fields={"owner": "u1"})
        async with redis.pipeline(transaction=False) as pipe:
            store.queue_find(pipe, thread_id)
            store.queue_find(pipe, "absent")
            present, absent = await pipe.execute()
        assert ThreadMetadata.from_reply(thread_id, present) == ThreadMetadata(thread_id, Role.CODER, owner="u1")
        assert ThreadMetadata.from_reply("absent", absent) is None

    async def test_known_in_a_batch(self, store: ThreadMetadataStore, redis: Redis, thread_id: str) -> None:
        await store.create(thread_id, kind=Role.REVIEWER, fields={"repository": "acme/widgets"})
        connections = BatchConnections(redis)
        try:
            batch = Batch(connections)
            store.queue_known(batch, thread_id)
            store.queue_known(batch, "absent")
            present, absent = await batch.execute()
        finally:
            await connections.aclose()
        assert KnownThread.from_reply(present) == KnownThread(Role.REVIEWER, "acme/widgets")
        assert KnownThread.from_reply(absent) is None

    async def test_scan_finds_every_thread(self, store: ThreadMetadataStore) -> None:
        created = {str(uuid.uuid4()) for _ in range(3)}
        for thread_id in created:
            await store.create(thread_id, kind=Role.CODER, fields={"repository": "acme/widgets"})
        scanned = {thread_id: fields async for thread_id, fields in store.scan(batch=1)}
        assert set(scanned) == created
        assert all(fields == {"kind": "coder", "repository": "acme/widgets"} for fields in scanned.values())


class TestUpdate:
    async def test_sets_and_deletes(self, store: ThreadMetadataStore, thread_id: str) -> None:
        await store.create(thread_id, kind=Role.CODER, fields={"model": "o3", "effort": "high"})
        result = await store.update(thread_id, lambda thread: {"model": None, "title": "Fix it"})
        assert result == ThreadMetadata(thread_id, Role.CODER, effort="high", title="Fix it")
        assert await store.get(thread_id) == result

    async def test_the_reply_address(self, store: ThreadMetadataStore, thread_id: str) -> None:
        await store.create(thread_id, kind=Role.CODER, fields={"reply_to": ADDRESS.model_dump_json()})
        moved = ADDRESS.model_copy(update={"address": {**ADDRESS.address, "check_run_id": "9"}})
        await store.set_reply_to(thread_id, moved)
        assert (await store.get(thread_id)).reply_to == moved

    async def test_the_state_and_its_activity(self, store: ThreadMetadataStore, thread_id: str) -> None:
        await store.create(thread_id, kind=Role.CODER)
        at = datetime(2026, 12, 4, 12, tzinfo=UTC)
        assert await store.set_state(thread_id, ThreadState.IDLE, unless=(), at=at, outcome="completed")
        thread = await store.get(thread_id)
        assert (thread.state, thread.last_activity, thread.outcome) == (ThreadState.IDLE, at, "completed")
        assert await store.state(thread_id) is ThreadState.IDLE

    async def test_kind_never_changes(self, store: ThreadMetadataStore, thread_id: str) -> None:
        await store.create(thread_id, kind=Role.CODER)
        with pytest.raises(ValueError, match="kind"):
            await store.update(thread_id, lambda thread: {"kind": "reviewer"})
        with pytest.raises(ValueError, match="kind"):
            await store.compare_and_set(thread_id, "kind", expected="coder", new="reviewer")

    async def test_concurrent_writers_on_separate_connections_lose_nothing(
        self, settings: Settings, keys: Keys, thread_id: str
    ) -> None:
        writers = 8
        clients = [await connect_redis(settings.redis) for _ in range(writers)]
        try:
            stores = [ThreadMetadataStore(client, keys) for client in clients]
            await stores[0].create(thread_id, kind=Role.CODER, fields={"title": "0"})
            attempts = 0

            def increment(thread: ThreadMetadata) -> dict[str, str | None]:
                nonlocal attempts
                attempts += 1
                return {"title": str(int(thread.title or "0") + 1)}

            await asyncio.gather(*(store.update(thread_id, increment) for store in stores for _ in range(25)))
            assert (await stores[0].get(thread_id)).title == str(writers * 25)
            assert attempts > writers * 25, "the writers never conflicted, so retries were not exercised"
        finally:
            await asyncio.gather(*(client.aclose() for client in clients))


class TestCompareAndSet:
    async def test_absent_expected(self, store: ThreadMetadataStore, thread_id: str) -> None:
        await store.create(thread_id, kind=Role.CODER)
        assert await store.compare_and_set(thread_id, "sandbox_id", expected=None, new="creating")
        assert not await store.compare_and_set(thread_id, "sandbox_id", expected=None, new="other")
        assert (await store.get(thread_id)).sandbox_id == "creating"

    async def test_replace_and_delete(self, store: ThreadMetadataStore, thread_id: str) -> None:
        await store.create(thread_id, kind=Role.CODER, fields={"sandbox_id": "creating"})
        assert not await store.compare_and_set(thread_id, "sandbox_id", expected="wrong", new="sb-1")
        assert await store.compare_and_set(thread_id, "sandbox_id", expected="creating", new="sb-1")
        assert await store.compare_and_set(thread_id, "sandbox_id", expected="sb-1", new=None)
        assert (await store.get(thread_id)).sandbox_id is None

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
