"""The clients of :func:`drydock.infra.redis.redis_client` ride over a store restart: pooled
connections the restart left stale are reconnected, and a write sent while the store is down for
a moment waits for it instead of failing the run. A real Valkey of the test's own, restarted."""

from __future__ import annotations

import asyncio
import uuid

from langgraph.checkpoint.base import empty_checkpoint

from drydock.checkpoints import open_checkpointer
from drydock.config import Settings
from drydock.embedded import EmbeddedServer
from drydock.infra.redis import redis_client

POOLED = 6


class TestStoreRestart:
    async def test_the_next_pipeline_writes_after_a_restart_succeed_on_every_pooled_connection(
        self, settings: Settings, own_valkey: EmbeddedServer
    ) -> None:
        client = redis_client(settings.redis, own_valkey.url, decode_responses=True)
        try:
            # Several connections in the pool at once, all of them left stale by the restart.
            await asyncio.gather(*(client.blpop([f"nothing-{n}"], timeout=0.2) for n in range(POOLED)))
            await own_valkey.stop()
            await own_valkey.start()

            async def write(n: int) -> list[object]:
                async with client.pipeline(transaction=True) as pipe:
                    pipe.hset(f"run-{n}", mapping={"state": "done"})
                    pipe.expire(f"run-{n}", 60)
                    return await pipe.execute()

            results = await asyncio.gather(*(write(n) for n in range(POOLED)))
            assert results == [[1, True]] * POOLED
            assert await client.hget("run-0", "state") == "done"
        finally:
            await client.aclose()

    async def test_a_write_while_the_store_restarts_waits_for_it(
        self, settings: Settings, own_valkey: EmbeddedServer
    ) -> None:
        client = redis_client(settings.redis, own_valkey.url, decode_responses=True)
        try:
            await client.ping()
            await own_valkey.stop()

            async def start_soon() -> None:
                await asyncio.sleep(1.0)
                await own_valkey.start()

            starting = asyncio.create_task(start_soon())
            async with client.pipeline(transaction=True) as pipe:
                pipe.set("written", "while restarting")
                pipe.get("written")
                assert await pipe.execute() == [True, "while restarting"]
            await starting
        finally:
            await client.aclose()

    async def test_checkpoint_writes_go_on_after_a_restart(
        self, settings: Settings, own_valkey: EmbeddedServer
    ) -> None:
        thread = str(uuid.uuid4())
        async with open_checkpointer(settings.redis.model_copy(update={"url": own_valkey.url})) as saver:
            config = await saver.aput(
                {"configurable": {"thread_id": thread, "checkpoint_ns": ""}},
                empty_checkpoint(),
                {"source": "input", "step": -1, "parents": {}},
                {},
            )
            await own_valkey.stop()
            await own_valkey.start()

            await saver.aput_writes(config, [("messages", "after the restart")], task_id="task-1")

            saved = await saver.aget_tuple(config)
        assert saved is not None
        assert saved.pending_writes == [("task-1", "messages", "after the restart")]
