from __future__ import annotations

import asyncio
import contextlib
import gc
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from drydock.config import Settings
from drydock.embedded import EmbeddedServer, valkey_server
from drydock.infra.redis import Keys, connect_redis, redis_client
from drydock.threads import Lease, LeaseBusy, LeaseLost, Leases

SHORT = timedelta(milliseconds=600)


@pytest.fixture
def leases(redis: Redis, keys: Keys) -> Leases:
    return Leases(redis, keys, ttl=SHORT)


class TestAcquire:
    async def test_hundred_concurrent_acquirers_one_holder(
        self, settings: Settings, keys: Keys, thread_id: str
    ) -> None:
        clients = [await connect_redis(settings.redis) for _ in range(10)]
        try:
            contenders = [Leases(clients[i % 10], keys, ttl=timedelta(seconds=30)) for i in range(100)]
            results = await asyncio.gather(*(c.acquire(thread_id, f"worker-{i}") for i, c in enumerate(contenders)))
            holders = [lease for lease in results if lease is not None]
            assert len(holders) == 1
        finally:
            await asyncio.gather(*(client.aclose() for client in clients))

    async def test_release_lets_the_next_one_in_with_a_higher_fence(self, leases: Leases, thread_id: str) -> None:
        first = await leases.acquire(thread_id, "a")
        assert first is not None
        assert await leases.acquire(thread_id, "b") is None
        assert await leases.release(first)
        second = await leases.acquire(thread_id, "b")
        assert second is not None
        assert second.fence > first.fence

    async def test_expired_lease_is_taken_with_a_higher_fence(self, leases: Leases, thread_id: str) -> None:
        stale = await leases.acquire(thread_id, "stopped-renewing")
        assert stale is not None
        await asyncio.sleep(SHORT.total_seconds() + 0.1)
        fresh = await leases.acquire(thread_id, "next")
        assert fresh is not None
        assert fresh.fence > stale.fence
        assert not await leases.renew(stale), "the old holder must not renew someone else's lease"
        assert not await leases.release(stale), "the old holder must not release someone else's lease"
        assert await leases.renew(fresh)

    async def test_owner_names_cannot_forge_tokens(self, leases: Leases, thread_id: str) -> None:
        with pytest.raises(ValueError, match="owner"):
            await leases.acquire(thread_id, "a|1")


class TestHold:
    async def test_renews_beyond_the_ttl_and_releases(self, leases: Leases, thread_id: str) -> None:
        async with leases.hold(thread_id, "a") as lease:
            await asyncio.sleep(SHORT.total_seconds() * 2.5)
            assert await leases.acquire(thread_id, "b") is None
        after = await leases.acquire(thread_id, "b")
        assert after is not None
        assert after.fence > lease.fence

    async def test_busy(self, leases: Leases, thread_id: str) -> None:
        assert await leases.acquire(thread_id, "a") is not None
        with pytest.raises(LeaseBusy):
            async with leases.hold(thread_id, "b"):
                pytest.fail("entered a block whose lease is held by another worker")

    async def test_taken_over_lease_cancels_the_block(
        self, leases: Leases, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        reached_end = False

        async def run_while_stolen() -> None:
            nonlocal reached_end
            async with leases.hold(thread_id, "a"):
                await redis.delete(keys.lease(thread_id))
                assert await leases.acquire(thread_id, "thief") is not None
                await asyncio.sleep(SHORT.total_seconds() * 3)
                reached_end = True

        with pytest.raises(LeaseLost):
            await run_while_stolen()
        assert not reached_end

    async def test_a_block_that_swallows_the_cancellation_still_ends(
        self, leases: Leases, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        swallowed, reached_end = False, False

        async def run_on_after_a_swallow() -> None:
            nonlocal swallowed, reached_end
            async with leases.hold(thread_id, "a"):
                await redis.delete(keys.lease(thread_id))
                try:
                    await asyncio.sleep(SHORT.total_seconds() * 3)
                except asyncio.CancelledError:
                    swallowed = True  # as a library racing a timeout against an answer may
                await asyncio.sleep(SHORT.total_seconds() * 3)
                reached_end = True

        with pytest.raises(LeaseLost):
            await run_on_after_a_swallow()
        assert swallowed
        assert not reached_end

    async def test_a_block_that_ends_after_its_lease_was_lost_ends_with_lease_lost(
        self, leases: Leases, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        async def swallow_every_cancellation() -> None:
            async with leases.hold(thread_id, "a"):
                await redis.delete(keys.lease(thread_id))
                loop = asyncio.get_running_loop()
                deadline = loop.time() + SHORT.total_seconds() * 3
                while loop.time() < deadline:
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.sleep(0.01)

        with pytest.raises(LeaseLost):
            await swallow_every_cancellation()

    async def test_renewal_failing_cancels_the_block_within_the_ttl(self, keys: Keys, thread_id: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            server = valkey_server(Path(tmp))
            await server.start()
            client = Redis.from_url(server.url, decode_responses=True, socket_timeout=0.2, socket_connect_timeout=0.2)
            leases = Leases(client, keys, ttl=SHORT)
            loop = asyncio.get_running_loop()
            stopped_at = 0.0

            async def run_while_redis_is_down() -> None:
                nonlocal stopped_at
                async with leases.hold(thread_id, "a"):
                    await server.stop()
                    stopped_at = loop.time()
                    await asyncio.sleep(10)

            try:
                with pytest.raises(LeaseLost):
                    await run_while_redis_is_down()
                assert loop.time() - stopped_at <= SHORT.total_seconds() + 0.3
            finally:
                await server.stop()
                await client.aclose()

    async def test_a_retrying_client_still_loses_the_lease_within_the_ttl(
        self, settings: Settings, own_valkey: EmbeddedServer, keys: Keys, thread_id: str
    ) -> None:
        client = redis_client(settings.redis, own_valkey.url, decode_responses=True)
        leases = Leases(client, keys, ttl=timedelta(milliseconds=1200))
        loop = asyncio.get_running_loop()
        stopped_at = 0.0

        async def run_while_redis_is_down() -> None:
            nonlocal stopped_at
            async with leases.hold(thread_id, "a"):
                await own_valkey.stop()
                stopped_at = loop.time()
                await asyncio.sleep(10)

        try:
            with pytest.raises(LeaseLost):
                await run_while_redis_is_down()
            assert loop.time() - stopped_at <= 1.2 + 0.3
        finally:
            await client.aclose()

    async def test_outer_cancellation_is_not_swallowed(self, leases: Leases, thread_id: str) -> None:
        async def hold_forever() -> None:
            async with leases.hold(thread_id, "a"):
                await asyncio.sleep(10)

        task = asyncio.create_task(hold_forever())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await leases.acquire(thread_id, "b") is not None, "a cancelled holder releases its lease"

    async def test_exit_ends_a_renewer_whose_cancellation_was_swallowed(self, leases: Leases, thread_id: str) -> None:
        renewing = asyncio.Event()
        real_renew = leases.renew

        async def renew_swallowing_cancellation(lease: Lease) -> bool:
            # What Python 3.11's asyncio.wait_for does when the cancellation and the answer meet.
            renewing.set()
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                return True
            return await real_renew(lease)

        leases.renew = renew_swallowing_cancellation  # type: ignore[method-assign]
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(SHORT.total_seconds() * 3):
            async with leases.hold(thread_id, "a"):
                await renewing.wait()
                exiting = loop.time()
        assert loop.time() - exiting < SHORT.total_seconds() / 3, "the exit waited for another renewal"
        assert await leases.acquire(thread_id, "b") is not None, "the lease was released"


class TestHeldIndex:
    async def test_the_block_starts_before_the_index_and_the_release_waits_for_it(
        self, leases: Leases, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        writing = asyncio.Event()
        real_index = leases.index

        async def slow_index(lease: Lease) -> None:
            writing.set()
            await asyncio.sleep(0.2)
            await real_index(lease)

        leases.index = slow_index  # type: ignore[method-assign]
        async with leases.hold(thread_id, "a"):
            await writing.wait()
            assert await redis.zscore(keys.leases_held(), thread_id) is None, "the block waited for the index"
        await asyncio.sleep(0.3)
        assert await redis.zscore(keys.leases_held(), thread_id) is None, "the index outlived the lease"

    async def test_a_lease_held_through_its_block_is_indexed_by_expiry(
        self, leases: Leases, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        async with leases.hold(thread_id, "a"):
            await asyncio.sleep(0.05)
            assert await redis.zscore(keys.leases_held(), thread_id) is not None

    async def test_an_index_that_fails_does_not_stop_the_block(
        self, leases: Leases, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        async def failing_index(lease: Lease) -> None:
            raise ConnectionError("redis went away")

        leases.index = failing_index  # type: ignore[method-assign]
        ran = False
        async with leases.hold(thread_id, "a"):
            ran = True
        assert ran
        assert await leases.take(thread_id, "b") is not None, "the lease was released"

    async def test_an_index_that_fails_after_its_holder_was_cancelled_is_still_retrieved(
        self, leases: Leases, thread_id: str
    ) -> None:
        started = asyncio.Event()
        fail = asyncio.Event()
        indexes: list[asyncio.Task[Any]] = []

        async def failing_index(lease: Lease) -> None:
            indexes.append(asyncio.current_task())  # type: ignore[arg-type]
            started.set()
            await fail.wait()
            raise ConnectionError("redis went away")

        leases.index = failing_index  # type: ignore[method-assign]

        async def hold_briefly() -> None:
            async with leases.hold(thread_id, "a"):
                pass

        holder = asyncio.create_task(hold_briefly())
        await started.wait()
        # Cancelled while its exit waits for the index: the exit never reads the index's error.
        holder.cancel()
        with pytest.raises(asyncio.CancelledError):
            await holder
        fail.set()
        await asyncio.wait(indexes)
        # Other tests' garbage on this worker (an unclosed client session) is collected first, so
        # that the handler below hears only of what this test leaves.
        gc.collect()
        loop = asyncio.get_running_loop()
        unretrieved: list[dict[str, object]] = []
        previous = loop.get_exception_handler()
        loop.set_exception_handler(lambda _, context: unretrieved.append(context))
        try:
            del holder
            indexes.clear()
            gc.collect()
        finally:
            loop.set_exception_handler(previous)
        assert not unretrieved, [context.get("message") for context in unretrieved]
