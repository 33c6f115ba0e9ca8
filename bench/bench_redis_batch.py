"""The ingress's per-delivery Redis round trip: the de-duplication claim and five routing reads
(team defaults, linked account, repository settings, a PR record, the thread's kind), as a
redis-py pipeline and as a :class:`drydock.infra.redis.Batch`, one after another against the
embedded Valkey. The figure is this process's CPU per round trip (what the ingress pays; the
server's work is Valkey's), in alternating rounds so a change of the VM's speed hits both.

Run: ``pdm run bench redis_batch``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis

from drydock.config import load_settings
from drydock.embedded import embedded_infrastructure
from drydock.infra.redis import Batch, BatchConnections, Keys, Queue, redis_client

CALLS = 5000
ROUNDS = 3
KEYS = Keys(prefix="bench-batch")
THREAD = KEYS.thread("0b6c3d7e-0000-5000-8000-000000000001")


def _queue(queue: Queue, index: int) -> None:
    queue.set(KEYS.delivery("github", f"delivery-{index}"), "pending", nx=True, px=600_000, get=True)
    queue.get(KEYS.team())
    queue.get(KEYS.account_link("github", "12345"))
    queue.get(KEYS.repository("github.com", "acme/widgets"))
    queue.hget(KEYS.pr_record("github.com", "acme/widgets", 7), "thread_id")
    queue.hmget(THREAD, ["kind", "repository"])


async def _cpu_per_call(operation: Callable[[int], Awaitable[Any]]) -> float:
    for index in range(200):
        await operation(index)
    started = time.process_time()
    for index in range(CALLS):
        await operation(index)
    return (time.process_time() - started) / CALLS * 1e6


async def main() -> None:
    async with embedded_infrastructure(nats=False) as urls:
        assert urls.redis is not None
        settings = load_settings(redis={"url": urls.redis})
        # As the ingress's own client: no per-command timeouts, a pool that never waits.
        redis: Redis = redis_client(
            settings.redis, urls.redis, decode_responses=True, socket_timeout=None, max_connections=8
        )
        connections = BatchConnections(redis)

        async def pipeline(index: int) -> list[Any]:
            async with redis.pipeline(transaction=False) as pipe:
                _queue(pipe, index)
                return await pipe.execute()

        async def batch(index: int) -> list[Any]:
            commands = Batch(connections)
            _queue(commands, index)
            return await commands.execute()

        try:
            await redis.set(KEYS.team(), '{"allowed_organizations": ["acme"]}')
            await redis.set(KEYS.repository("github.com", "acme/widgets"), '{"full_name": "acme/widgets"}')
            await redis.hset(THREAD, mapping={"kind": "coder", "repository": "acme/widgets"})
            if (await pipeline(-1))[1:] != (await batch(-1))[1:]:
                raise RuntimeError("the pipeline and the batch read different values")
            figures: dict[str, list[float]] = {"redis-py pipeline": [], "Batch": []}
            for _ in range(ROUNDS):
                figures["redis-py pipeline"].append(await _cpu_per_call(pipeline))
                figures["Batch"].append(await _cpu_per_call(batch))
            for name, values in figures.items():
                rounds = ", ".join(f"{value:.1f}" for value in values)
                print(f"  {name:<18} CPU per round trip of 6 commands: {min(values):6.1f} µs (rounds: {rounds})")
        finally:
            await connections.aclose()
            await redis.aclose()
