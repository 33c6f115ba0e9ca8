"""Done marks: they ride on the next delivery's lookup round trip, ahead of its claim, or are
written alone shortly after when no delivery follows; a redelivery never passes for a new
delivery while its first's mark waits."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from redis.asyncio import Redis

from drydock.channels.intents import DELIVERY_DONE, DELIVERY_PENDING
from drydock.infra.redis import Batch, BatchConnections, Keys
from services.ingress.dedup import ClaimResult, Deliveries
from tests.waiting import eventually


@pytest.fixture
async def deliveries(redis: Redis, keys: Keys) -> AsyncIterator[Deliveries]:
    batches = BatchConnections(redis)
    yield Deliveries(
        redis,
        batches,
        keys,
        ttl=timedelta(hours=24),
        claim_ttl=timedelta(minutes=10),
        write_timeout=timedelta(seconds=5),
    )
    await batches.aclose()


async def claim(deliveries: Deliveries, batches: BatchConnections, delivery_id: str) -> ClaimResult:
    """One lookup round trip's part: the waiting marks, then the claim."""
    batch = Batch(batches)
    marks = deliveries.queue_marks(batch)
    deliveries.queue_claim(batch, "github", delivery_id)
    replies = await batch.execute()
    deliveries.marks_written(marks)
    return deliveries.claim_result(replies[len(marks)], "github", delivery_id)


class TestDoneMarks:
    async def test_a_mark_rides_ahead_of_the_next_claim(self, deliveries: Deliveries, redis: Redis, keys: Keys) -> None:
        batches = BatchConnections(redis)
        first, other = uuid.uuid4().hex, uuid.uuid4().hex
        try:
            assert await claim(deliveries, batches, first) is ClaimResult.CLAIMED
            deliveries.done("github", first)
            assert await claim(deliveries, batches, other) is ClaimResult.CLAIMED
            assert await redis.get(keys.delivery("github", first)) == DELIVERY_DONE
            assert await claim(deliveries, batches, first) is ClaimResult.DUPLICATE
        finally:
            await deliveries.aclose()
            await batches.aclose()

    async def test_the_redelivery_carrying_its_own_mark_is_a_duplicate(
        self, deliveries: Deliveries, redis: Redis
    ) -> None:
        batches = BatchConnections(redis)
        delivery = uuid.uuid4().hex
        try:
            await claim(deliveries, batches, delivery)
            deliveries.done("github", delivery)
            assert await claim(deliveries, batches, delivery) is ClaimResult.DUPLICATE
        finally:
            await deliveries.aclose()
            await batches.aclose()

    async def test_a_mark_is_written_alone_when_no_delivery_follows(
        self, deliveries: Deliveries, redis: Redis, keys: Keys
    ) -> None:
        batches = BatchConnections(redis)
        delivery = uuid.uuid4().hex
        try:
            await claim(deliveries, batches, delivery)
            deliveries.done("github", delivery)

            async def written() -> bool:
                return await redis.get(keys.delivery("github", delivery)) == DELIVERY_DONE

            await eventually(written, within=5, what="the done mark written")
            assert await redis.pttl(keys.delivery("github", delivery)) > timedelta(hours=23).total_seconds() * 1000
        finally:
            await deliveries.aclose()
            await batches.aclose()

    async def test_a_pending_claim_whose_mark_waits_here_is_a_duplicate(
        self, deliveries: Deliveries, redis: Redis, keys: Keys
    ) -> None:
        delivery = uuid.uuid4().hex
        deliveries.done("github", delivery)
        assert deliveries.claim_result(DELIVERY_PENDING, "github", delivery) is ClaimResult.DUPLICATE
        assert deliveries.claim_result(DELIVERY_PENDING, "github", uuid.uuid4().hex) is ClaimResult.IN_PROGRESS
        await deliveries.aclose()
        assert await redis.get(keys.delivery("github", delivery)) == DELIVERY_DONE
        assert deliveries.claim_result(DELIVERY_PENDING, "github", delivery) is ClaimResult.IN_PROGRESS
