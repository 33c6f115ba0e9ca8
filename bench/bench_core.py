"""Lease acquire+release and inbox append/read against the embedded NATS and Valkey.

Targets on loopback: lease acquire+release p50 < 1 ms; acknowledged inbox append p50 < 1 ms.
Run: ``pdm run python -m bench core``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from datetime import timedelta

from bench.harness import Figures, measure, report
from drydock.bus import Author, Bus, Channel, InboxMessage, ReplyAddress, connect_nats, provision, topology
from drydock.config import load_settings
from drydock.embedded import embedded_infrastructure
from drydock.infra.redis import Keys, connect_redis
from drydock.threads import Inbox, Leases

SAMPLES = 2000
CONCURRENCY = 64


def _message(thread_id: str, delivery_id: str) -> InboxMessage:
    return InboxMessage(
        delivery_id=delivery_id,
        thread_id=thread_id,
        channel=Channel.GITHUB,
        author=Author(channel=Channel.GITHUB, external_id="583231", name="octocat"),
        text="@drydock please fix the flaky test in tests/test_api.py " * 4,
        repository="acme/widgets",
        references={"issue": "42", "comment": "1234567"},
        reply_to=ReplyAddress(channel=Channel.GITHUB, address={"repository": "acme/widgets", "issue": "42"}),
    )


async def _concurrent(name: str, operation: object, total: int) -> Figures:
    assert callable(operation)
    latencies: list[float] = []
    queue = iter(range(total))

    async def worker() -> None:
        for _ in queue:
            begin = time.perf_counter()
            await operation()
            latencies.append((time.perf_counter() - begin) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return Figures(name, total, time.perf_counter() - started, latencies)


async def main() -> None:
    async with embedded_infrastructure() as urls:
        settings = load_settings(nats={"url": urls.nats}, redis={"url": urls.redis})
        nc = await connect_nats(settings.nats, name="bench")
        redis = await connect_redis(settings.redis)
        try:
            bus = Bus(nc)
            await provision(bus.js, topology(settings.nats))
            leases = Leases(redis, Keys("bench"), ttl=timedelta(seconds=30))
            inbox = Inbox(bus)
            thread_id = str(uuid.uuid4())
            counter = itertools.count()

            async def lease_cycle() -> None:
                lease = await leases.acquire(thread_id, "bench")
                assert lease is not None
                await leases.release(lease)

            async def append() -> None:
                await inbox.append(_message(thread_id, f"d{next(counter)}"))

            report(await measure("lease acquire+release", lease_cycle, count=SAMPLES), target_p50_ms=1.0)
            report(await measure("inbox append (acknowledged)", append, count=SAMPLES), target_p50_ms=1.0)

            reader_thread = str(uuid.uuid4())
            for i in range(10):
                await inbox.append(_message(reader_thread, f"r{i}"))

            async def read_ten() -> None:
                assert len(await inbox.read_after(reader_thread, 0)) == 10

            report(await measure("inbox read after cursor (10 messages)", read_ten, count=SAMPLES // 4))

            threads = [str(uuid.uuid4()) for _ in range(CONCURRENCY)]
            spread = itertools.cycle(threads)

            async def lease_cycle_spread() -> None:
                lease = await leases.acquire(next(spread), f"bench-{next(counter)}")
                if lease is not None:
                    await leases.release(lease)

            async def append_spread() -> None:
                await inbox.append(_message(next(spread), f"c{next(counter)}"))

            report(
                await _concurrent(f"lease acquire+release x{CONCURRENCY} concurrent", lease_cycle_spread, SAMPLES * 5)
            )
            report(await _concurrent(f"inbox append x{CONCURRENCY} concurrent", append_spread, SAMPLES * 5))
        finally:
            await redis.aclose()
            await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
