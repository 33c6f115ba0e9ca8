from __future__ import annotations

import asyncio

import pytest

from drydock.bus import Author, Bus, Channel, InboxMessage, ReplyAddress
from drydock.threads import Inbox, StoredMessage


def message(thread_id: str, delivery_id: str, text: str) -> InboxMessage:
    return InboxMessage(
        delivery_id=delivery_id,
        thread_id=thread_id,
        channel=Channel.GITHUB,
        author=Author(channel=Channel.GITHUB, external_id="1", name="ada"),
        text=text,
        repository="acme/widgets",
        reply_to=ReplyAddress(channel=Channel.GITHUB, address={"issue": "42"}),
    )


@pytest.fixture
def inbox(bus: Bus) -> Inbox:
    return Inbox(bus)


class TestInbox:
    async def test_order_is_preserved(self, inbox: Inbox, thread_id: str) -> None:
        for i in range(20):
            await inbox.append(message(thread_id, f"d{i}", f"m{i}"))
        stored = await inbox.read_after(thread_id)
        assert [item.message.text for item in stored] == [f"m{i}" for i in range(20)]
        assert [item.seq for item in stored] == sorted(item.seq for item in stored)

    async def test_same_delivery_id_is_stored_once(self, inbox: Inbox, thread_id: str) -> None:
        first = await inbox.append(message(thread_id, "delivery-1", "hello"))
        again = await inbox.append(message(thread_id, "delivery-1", "hello (redelivered)"))
        assert not first.duplicate
        assert again.duplicate
        assert again.seq == first.seq
        assert [item.message.text for item in await inbox.read_after(thread_id)] == ["hello"]

    async def test_concurrent_duplicates_are_stored_once(self, inbox: Inbox, thread_id: str) -> None:
        results = await asyncio.gather(*(inbox.append(message(thread_id, "burst", "x")) for _ in range(10)))
        assert sum(not result.duplicate for result in results) == 1
        assert len(await inbox.read_after(thread_id)) == 1

    async def test_read_after_cursor_returns_exactly_the_newer(self, inbox: Inbox, thread_id: str) -> None:
        results = [await inbox.append(message(thread_id, f"d{i}", f"m{i}")) for i in range(5)]
        cursor = results[2].seq
        newer = await inbox.read_after(thread_id, cursor)
        assert [item.message.text for item in newer] == ["m3", "m4"]
        assert await inbox.read_after(thread_id, results[-1].seq) == []

    async def test_threads_do_not_see_each_other(self, inbox: Inbox, thread_id: str) -> None:
        other = "00000000-0000-4000-8000-" + thread_id[-12:]
        await inbox.append(message(thread_id, "a", "mine"))
        await inbox.append(message(other, "a", "theirs"))
        assert [item.message.text for item in await inbox.read_after(thread_id)] == ["mine"]
        assert [item.message.text for item in await inbox.read_after(other)] == ["theirs"]

    async def test_limit(self, inbox: Inbox, thread_id: str) -> None:
        for i in range(5):
            await inbox.append(message(thread_id, f"d{i}", f"m{i}"))
        assert [item.message.text for item in await inbox.read_after(thread_id, limit=2)] == ["m0", "m1"]


class CountedInbox(Inbox):
    """The real inbox, counting its reads of the stream."""

    reads = 0

    async def read_after(self, thread_id: str, cursor: int = 0, *, limit: int | None = None) -> list[StoredMessage]:
        self.reads += 1
        return await super().read_after(thread_id, cursor, limit=limit)


class TestInboxWatch:
    async def test_nothing_new_costs_one_read(self, bus: Bus, thread_id: str) -> None:
        inbox = CountedInbox(bus)
        first = await inbox.append(message(thread_id, "d0", "m0"))
        watch = await inbox.watch(thread_id, recheck=60)
        try:
            assert [item.seq for item in await watch.read_after(thread_id, 0)] == [first.seq]
            for _ in range(5):
                assert await watch.read_after(thread_id, first.seq) == []
            assert inbox.reads == 1
        finally:
            await watch.close()

    async def test_a_message_that_arrives_is_read(self, bus: Bus, thread_id: str) -> None:
        inbox = CountedInbox(bus)
        watch = await inbox.watch(thread_id, recheck=60)
        try:
            assert await watch.read_after(thread_id, 0) == []
            arrived = await inbox.append(message(thread_id, "d1", "later"))
            found: list[StoredMessage] = []
            async with asyncio.timeout(5):
                while not found:
                    found = await watch.read_after(thread_id, 0)
            assert [(item.seq, item.message.text) for item in found] == [(arrived.seq, "later")]
            assert await watch.read_after(thread_id, arrived.seq) == []
        finally:
            await watch.close()

    async def test_the_same_question_is_answered_from_the_last_read(self, bus: Bus, thread_id: str) -> None:
        inbox = CountedInbox(bus)
        first = await inbox.append(message(thread_id, "d3", "m3"))
        watch = await inbox.watch(thread_id, recheck=60)
        try:
            # The run's start reads after its cursor; its first model call asks the same.
            for _ in range(2):
                assert [item.seq for item in await watch.read_after(thread_id, 0)] == [first.seq]
            assert inbox.reads == 1
            arrived = await inbox.append(message(thread_id, "d4", "m4"))
            found: list[StoredMessage] = []
            async with asyncio.timeout(5):
                while len(found) < 2:
                    found = await watch.read_after(thread_id, 0)
            assert [item.seq for item in found] == [first.seq, arrived.seq]
        finally:
            await watch.close()

    async def test_a_cursor_behind_what_was_read_reads_again(self, bus: Bus, thread_id: str) -> None:
        inbox = CountedInbox(bus)
        appended = [await inbox.append(message(thread_id, f"d{i}", f"m{i}")) for i in range(3)]
        watch = await inbox.watch(thread_id, recheck=60)
        try:
            assert len(await watch.read_after(thread_id, 0)) == 3
            # The model call that injected them failed: the state's cursor did not move.
            again = await watch.read_after(thread_id, appended[0].seq)
            assert [item.message.text for item in again] == ["m1", "m2"]
        finally:
            await watch.close()

    async def test_it_reads_again_after_the_recheck_time(self, bus: Bus, thread_id: str) -> None:
        inbox = CountedInbox(bus)
        watch = await inbox.watch(thread_id, recheck=0)
        try:
            for _ in range(3):
                assert await watch.read_after(thread_id, 0) == []
            assert inbox.reads == 3
        finally:
            await watch.close()

    async def test_a_closed_watch_reads_every_time(self, bus: Bus, thread_id: str) -> None:
        inbox = CountedInbox(bus)
        watch = await inbox.watch(thread_id, recheck=60)
        await watch.close()
        await watch.read_after(thread_id, 0)
        await inbox.append(message(thread_id, "d2", "after the close"))
        assert [item.message.text for item in await watch.read_after(thread_id, 0)] == ["after the close"]
