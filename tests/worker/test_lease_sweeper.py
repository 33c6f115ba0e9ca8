"""A run whose holder disappears without releasing its lease (a SIGKILLed worker leaves an
unacknowledged wake and an unreleased lease) resumes on another worker within the lease TTL and
a few seconds, with the default ack wait. Own embedded NATS and Valkey, provisioned with the
default topology."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from drydock.bus import Bus, Wake, connect_nats, provision, topology
from drydock.bus.streams import RUNS_STREAM, run_consumer
from drydock.channels.outbound import Outbound
from drydock.config import Settings, load_settings
from drydock.embedded import embedded_infrastructure
from drydock.infra.redis import Keys, connect_redis
from drydock.roles import Role
from drydock.threads import Inbox, Lease, Leases
from drydock.threads.metadata import ThreadMetadataStore
from drydock.worker.dead_letters import DeadLetterOffice
from drydock.worker.lease_sweeper import RESUME, LeaseSweeper
from drydock.worker.thread_runner import ThreadRunner
from drydock.worker.wake_consumer import WakeConsumer

LEASE_TTL = timedelta(seconds=3)
GRACE = 5.0


@contextlib.asynccontextmanager
async def own_world() -> AsyncIterator[tuple[Settings, Bus, Keys]]:
    async with embedded_infrastructure() as urls:
        settings = load_settings(nats={"url": urls.nats}, redis={"url": urls.redis}, lease={"ttl": LEASE_TTL})
        nc = await connect_nats(settings.nats, name="lease-sweeper-test")
        redis = await connect_redis(settings.redis)
        bus = Bus(nc)
        await provision(bus.js, topology(settings.nats))
        try:
            yield settings, bus, Keys(settings.redis.key_prefix)
        finally:
            await redis.aclose()
            await nc.close()


@pytest.mark.timeout(90)
class TestResumeWithinTheLease:
    async def test_a_dead_holder_s_thread_resumes_within_the_lease_ttl(self) -> None:
        async with own_world() as (settings, bus, keys):
            assert settings.nats.run_ack_wait == timedelta(seconds=60)
            redis = await connect_redis(settings.redis)
            thread_id = str(uuid.uuid4())
            await ThreadMetadataStore(redis, keys).create(thread_id, kind=Role.CODER)
            leases = Leases(redis, keys, ttl=settings.lease.ttl)

            # The worker that dies: it took the wake and the lease, and then nothing more.
            await bus.wake(Wake(thread_id=thread_id, role=Role.CODER))
            dying = await bus.js.pull_subscribe_bind(durable=run_consumer(Role.CODER), stream=RUNS_STREAM)
            [taken] = await dying.fetch(1, timeout=5)
            assert await leases.acquire(thread_id, "dead-worker") is not None
            await dying.unsubscribe()
            loop = asyncio.get_running_loop()
            died_at = loop.time()

            resumed = asyncio.Event()
            reasons: list[str] = []

            async def run(thread: str, lease: Lease) -> int:
                resumed.set()
                return 0

            runner = ThreadRunner(leases, Inbox(bus), run, owner="survivor")

            async def handle(wake: Wake) -> None:
                reasons.append(wake.reason)
                await runner(wake)

            consumer = WakeConsumer(
                bus,
                Role.CODER,
                handle,
                dead_letters=DeadLetterOffice(bus, redis, keys, Outbound({}, {}, [])),
                concurrency=2,
                heartbeat=settings.worker.heartbeat.total_seconds(),
                max_deliver=settings.nats.run_max_deliver,
            )
            sweeper = LeaseSweeper(bus, redis, keys, role=Role.CODER, interval=0.5)
            tasks = [asyncio.create_task(consumer.run()), asyncio.create_task(sweeper.run())]
            try:
                await asyncio.wait_for(resumed.wait(), LEASE_TTL.total_seconds() + GRACE)
                took = loop.time() - died_at
            finally:
                sweeper.stop()
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                await redis.aclose()
            assert took < LEASE_TTL.total_seconds() + GRACE
            assert reasons == [RESUME]
            assert taken.metadata.num_delivered == 1

    async def test_a_sweeper_leaves_another_roles_thread_to_that_roles_workers(self) -> None:
        async with own_world() as (settings, bus, keys):
            redis = await connect_redis(settings.redis)
            try:
                thread_id = str(uuid.uuid4())
                await ThreadMetadataStore(redis, keys).create(thread_id, kind=Role.REVIEWER)
                leases = Leases(redis, keys, ttl=timedelta(milliseconds=200))
                assert await leases.acquire(thread_id, "dead-worker") is not None
                deadline = asyncio.get_running_loop().time() + 10
                while await redis.exists(keys.lease(thread_id)):
                    assert asyncio.get_running_loop().time() < deadline, "the lease never expired"
                    await asyncio.sleep(0.05)

                assert await LeaseSweeper(bus, redis, keys, role=Role.CODER).sweep() == []
                assert await LeaseSweeper(bus, redis, keys, role=Role.REVIEWER).sweep() == [thread_id]
            finally:
                await redis.aclose()
