"""The warm pool's Redis side: one claim (the atomic pop-and-move script) and one refill
reservation, against the embedded Valkey. A claim is what a new thread waits for instead of a
pod start when the pool is warm (plus one daemon health check, not measured here).

Run: ``pdm run bench warm_pool``.
"""

from __future__ import annotations

import asyncio
import itertools
import time

from bench.harness import Figures, measure, report
from drydock.config import load_settings
from drydock.embedded import embedded_infrastructure
from drydock.infra.redis import Keys, connect_redis
from drydock.sandbox.providers.kubernetes.warm_pool_store import WarmPoolStore

SAMPLES = 2000
CONCURRENCY = 64
RECORD = {
    "id": "sbx-x",
    "provider": "kubernetes",
    "thread_id": "",
    "base_url": "http://10.0.0.1:8484",
    "token": "t" * 43,
}


async def main() -> None:
    async with embedded_infrastructure(nats=False) as urls:
        settings = load_settings(redis={"url": urls.redis})
        redis = await connect_redis(settings.redis)
        try:
            store = WarmPoolStore(redis, Keys("bench"), "sandboxes")
            ids = (f"sbx-{n}" for n in itertools.count())

            async def fill(count: int) -> None:
                for _ in range(count):
                    sandbox_id = next(ids)
                    await store.reserve(sandbox_id, size=10**9, now=time.time())
                    await store.ready(sandbox_id, RECORD, now=time.time())

            async def reserve() -> None:
                await store.reserve(next(ids), size=10**9, now=time.time())

            report(await measure("warm pool reserve", reserve, count=SAMPLES), target_p50_ms=1.0)
            await redis.delete(Keys("bench").warm_pool_entries("sandboxes"))
            await fill(SAMPLES + 20)

            async def claim() -> None:
                found = await store.claim(now=time.time())
                assert found is not None
                await store.complete(found[0])

            report(await measure("warm pool claim + complete", claim, count=SAMPLES), target_p50_ms=1.0)

            await fill(SAMPLES * 2)
            latencies: list[float] = []

            async def claimer() -> None:
                for _ in range(SAMPLES * 2 // CONCURRENCY):
                    begin = time.perf_counter()
                    found = await store.claim(now=time.time())
                    assert found is not None
                    await store.complete(found[0])
                    latencies.append((time.perf_counter() - begin) * 1000)

            started = time.perf_counter()
            await asyncio.gather(*(claimer() for _ in range(CONCURRENCY)))
            elapsed = time.perf_counter() - started
            report(Figures(f"warm pool claim + complete x{CONCURRENCY} concurrent", len(latencies), elapsed, latencies))
        finally:
            await redis.aclose()


if __name__ == "__main__":
    asyncio.run(main())
