from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StreamConfig
from redis.asyncio import Redis

from drydock.bus import Bus, Wake
from drydock.infra.redis import Keys
from drydock.roles import Role


@dataclass(frozen=True)
class WakeQueue:
    """A private work-queue stream and durable consumer shaped like DRYDOCK_RUNS' for one test."""

    bus: Bus
    stream: str
    durable: str
    prefix: str
    ack_wait: float
    max_deliver: int
    redis: Redis
    keys: Keys

    def subject(self, thread_id: str, role: Role = Role.CODER) -> str:
        return f"{self.prefix}.{role.value}.{thread_id}"

    async def wake(self, thread_id: str, role: Role = Role.CODER) -> None:
        await self.bus.publish(self.subject(thread_id, role), Wake(thread_id=thread_id, role=role))

    async def pending(self) -> int:
        info = await self.bus.js.consumer_info(self.stream, self.durable)
        return int(info.num_pending or 0) + int(info.num_ack_pending or 0)


@pytest.fixture
async def wake_queue(bus: Bus, redis: Redis, keys: Keys) -> AsyncIterator[WakeQueue]:
    tag = uuid.uuid4().hex[:10]
    stream, prefix = f"TEST_RUNS_{tag}", f"test.{tag}.run"
    queue = WakeQueue(bus, stream, "run-coder", prefix, ack_wait=1.0, max_deliver=3, redis=redis, keys=keys)
    await bus.js.add_stream(StreamConfig(name=stream, subjects=[f"{prefix}.*.*"], retention=RetentionPolicy.WORK_QUEUE))
    await bus.js.add_consumer(
        stream,
        ConsumerConfig(
            name=queue.durable,
            durable_name=queue.durable,
            filter_subject=f"{prefix}.coder.*",
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=queue.ack_wait,
            max_deliver=queue.max_deliver,
        ),
    )
    yield queue
    await bus.js.delete_stream(stream)
