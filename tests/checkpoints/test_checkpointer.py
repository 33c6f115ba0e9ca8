from __future__ import annotations

import operator
import re
from typing import Annotated, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.types import ERROR
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph_checkpoint_plainredis import AsyncRedisSaver
from redis.asyncio import Redis

from drydock.checkpoints import DrydockRedisSaver, build_checkpointer, open_checkpointer
from drydock.config import RedisSettings, Settings
from drydock.infra.redis import Keys, StoreUnavailable


class Tally(TypedDict):
    seen: Annotated[list[str], operator.add]


def _graph(checkpointer: AsyncRedisSaver) -> CompiledStateGraph[Tally, None, Tally, Tally]:
    async def note(state: Tally) -> dict[str, list[str]]:
        return {"seen": [f"step {len(state['seen']) + 1}"]}

    builder = StateGraph(Tally)
    builder.add_node("note", note)
    builder.add_edge(START, "note")
    builder.add_edge("note", END)
    return builder.compile(checkpointer=checkpointer)


class TestCheckpointer:
    async def test_a_thread_continues_from_its_checkpoint_in_a_new_graph(
        self, checkpointer: AsyncRedisSaver, thread_id: str
    ) -> None:
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        await _graph(checkpointer).ainvoke(Tally(seen=["start"]), config)
        result = await _graph(checkpointer).ainvoke(Tally(seen=[]), config)
        assert result["seen"] == ["start", "step 2", "step 3"]

    async def test_keys_live_under_the_prefix_keys_spells(
        self, checkpointer: AsyncRedisSaver, redis: Redis, keys: Keys, thread_id: str
    ) -> None:
        await _graph(checkpointer).ainvoke(Tally(seen=[]), {"configurable": {"thread_id": thread_id}})
        found = [key async for key in redis.scan_iter(match=f"{keys.checkpoints()}:cp:{thread_id}:*")]
        assert found

    async def test_an_unreachable_server_is_named(self) -> None:
        with pytest.raises(StoreUnavailable, match=re.escape("127.0.0.1:1")):
            async with open_checkpointer(RedisSettings(url="redis://127.0.0.1:1/0")):
                pass

    async def test_a_string_client_is_refused(self, settings: Settings) -> None:
        assert settings.redis.url is not None
        client = Redis.from_url(settings.redis.url, decode_responses=True)
        try:
            with pytest.raises(ValueError, match="decode_responses=False"):
                build_checkpointer(client, Keys("x"))
        finally:
            await client.aclose()


class TestPendingWrites:
    async def test_a_tasks_regular_write_keeps_its_first_value_and_an_error_its_last(
        self, checkpointer: DrydockRedisSaver, thread_id: str
    ) -> None:
        config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        stored = await checkpointer.aput(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
        await checkpointer.aput_writes(stored, [("seen", "first"), (ERROR, "first failure")], "task")
        await checkpointer.aput_writes(stored, [("seen", "again"), (ERROR, "second failure")], "task")

        loaded = await checkpointer.aget_tuple(stored)

        assert loaded is not None
        assert sorted(loaded.pending_writes or []) == [("task", ERROR, "second failure"), ("task", "seen", "first")]
