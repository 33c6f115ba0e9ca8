"""The batched walk of a delta channel's history returns what LangGraph's own walk returns."""

from __future__ import annotations

from typing import Annotated, Any, NotRequired, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from drydock.checkpoints import DrydockRedisSaver


def _extend(base: list[str], updates: list[list[str]]) -> list[str]:
    return [*base, *(item for update in updates for item in update)]


class Log(TypedDict):
    lines: Annotated[list[str], DeltaChannel(_extend, snapshot_frequency=7)]
    turns: NotRequired[int]


def _graph(checkpointer: DrydockRedisSaver) -> CompiledStateGraph[Log, None, Log, Log]:
    return _builder().compile(checkpointer=checkpointer)


def _graph_without_saver() -> CompiledStateGraph[Log, None, Log, Log]:
    """The same graph, to run as a subgraph on its parent's checkpointer."""
    return _builder().compile()


def _builder() -> StateGraph[Log, None, Log, Log]:
    async def first(state: Log) -> dict[str, Any]:
        return {"lines": [f"first {len(state['lines'])}"]}

    async def second(state: Log) -> dict[str, Any]:
        return {"lines": [f"second {len(state['lines'])}"], "turns": state.get("turns", 0) + 1}

    builder = StateGraph(Log)
    builder.add_node("first", first)
    builder.add_node("second", second)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    return builder


async def _both(saver: DrydockRedisSaver, config: RunnableConfig) -> tuple[Any, Any]:
    ours = await saver.aget_delta_channel_history(config=config, channels=["lines", "turns"])
    theirs = await BaseCheckpointSaver.aget_delta_channel_history(saver, config=config, channels=["lines", "turns"])
    return ours, theirs


class TestDeltaChannelHistory:
    async def test_every_checkpoint_of_a_long_thread_reads_the_same_history(
        self, checkpointer: DrydockRedisSaver, thread_id: str
    ) -> None:
        checkpointer.history_page = 4
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        graph = _graph(checkpointer)
        for turn in range(8):
            await graph.ainvoke(Log(lines=[f"turn {turn}"]), config)
        compared = 0
        async for saved in checkpointer.alist(config):
            ours, theirs = await _both(checkpointer, saved.config)
            assert ours == theirs
            compared += 1
        assert compared > 3 * checkpointer.history_page
        final = await graph.aget_state(config)
        assert len(final.values["lines"]) == 24

    async def test_a_fork_follows_its_own_parents(self, checkpointer: DrydockRedisSaver, thread_id: str) -> None:
        checkpointer.history_page = 3
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        graph = _graph(checkpointer)
        for turn in range(4):
            await graph.ainvoke(Log(lines=[f"turn {turn}"]), config)
        history = [saved async for saved in checkpointer.alist(config)]
        branch_point = history[len(history) // 2].config
        forked = await graph.aupdate_state(branch_point, {"lines": ["forked"]})
        await graph.ainvoke(None, forked)
        latest = await checkpointer.aget_tuple(config)
        assert latest is not None
        ours, theirs = await _both(checkpointer, latest.config)
        assert ours == theirs
        assert "forked" in (await graph.aget_state(config)).values["lines"]

    async def test_no_channels_and_unknown_checkpoints(self, checkpointer: DrydockRedisSaver, thread_id: str) -> None:
        config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_id": "nope"}}
        assert await checkpointer.aget_delta_channel_history(config=config, channels=[]) == {}
        ours, theirs = await _both(checkpointer, config)
        assert ours == theirs == {"lines": {"writes": []}, "turns": {"writes": []}}


async def _keys(checkpointer: DrydockRedisSaver, thread_id: str) -> list[bytes]:
    return [key async for key in checkpointer.client.scan_iter(match=f"*{thread_id}*", count=1000)]


class TestKeepLatest:
    async def test_the_thread_resumes_with_the_same_state_from_fewer_keys(
        self, checkpointer: DrydockRedisSaver, thread_id: str
    ) -> None:
        checkpointer.history_page = 4
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        graph = _graph(checkpointer)
        for turn in range(10):
            await graph.ainvoke(Log(lines=[f"turn {turn}"]), config)
        before = await graph.aget_state(config)
        keys_before = await _keys(checkpointer, thread_id)
        checkpoints_before = [saved async for saved in checkpointer.alist(config)]

        deleted = await checkpointer.keep_latest(thread_id)

        checkpoints_after = [saved async for saved in checkpointer.alist(config)]
        assert deleted == len(checkpoints_before) - len(checkpoints_after) > 0
        # The latest and its ancestors back to the last snapshot (every 7 updates of `lines`).
        assert len(checkpoints_after) <= 2 * 7 + 1
        assert len(await _keys(checkpointer, thread_id)) < len(keys_before) / 2
        after = await graph.aget_state(config)
        assert after.values == before.values
        assert len(after.values["lines"]) == 30
        latest = await checkpointer.aget_tuple(config)
        assert latest is not None
        ours, theirs = await _both(checkpointer, latest.config)
        assert ours == theirs
        # The thread goes on from where it was, and can be pruned again.
        await graph.ainvoke(Log(lines=["turn 10"]), config)
        assert len((await graph.aget_state(config)).values["lines"]) == 33
        await checkpointer.aprune([thread_id])
        final = await graph.aget_state(config)
        assert len(final.values["lines"]) == 33
        assert final.values["turns"] == 11

    async def test_nothing_is_deleted_before_the_first_snapshot(
        self, checkpointer: DrydockRedisSaver, thread_id: str
    ) -> None:
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        graph = _graph(checkpointer)
        await graph.ainvoke(Log(lines=["only turn"]), config)
        count = len([saved async for saved in checkpointer.alist(config)])
        assert await checkpointer.keep_latest(thread_id) == 0
        assert len([saved async for saved in checkpointer.alist(config)]) == count
        assert (await graph.aget_state(config)).values["lines"] == ["only turn", "first 1", "second 2"]

    async def test_an_unknown_strategy_is_refused_and_delete_deletes(
        self, checkpointer: DrydockRedisSaver, thread_id: str
    ) -> None:
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        await _graph(checkpointer).ainvoke(Log(lines=["a"]), config)
        with pytest.raises(ValueError, match="keep_latest or delete"):
            await checkpointer.aprune([thread_id], strategy="compact")
        await checkpointer.aprune([thread_id], strategy="delete")
        assert await checkpointer.aget_tuple(config) is None
