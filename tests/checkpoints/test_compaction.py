"""Compaction leaves a thread one checkpoint holding its whole state, which loads without
reading any history; reading one channel's value decodes only that channel."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from deepagents import create_deep_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from drydock.bus import Author, Bus, Channel, InboxMessage, ReplyAddress
from drydock.checkpoints import DrydockRedisSaver
from drydock.middleware.inbox_injection import InboxInjection
from drydock.middleware.planning import Planning
from drydock.threads import Inbox
from tests.checkpoints.history_reads import HistoryReads
from tests.checkpoints.test_delta_history import Log, _graph, _graph_without_saver
from tests.fakes.openai_server import Script, ScriptedModelServer
from tests.middleware.conftest import chat_model

PLANNED = 30
"""``write_todos`` calls in the long turn: with the model's replies, over 60 updates of
``messages``, past the Deep Agents snapshot (every 50) with more after it."""


def _message(thread_id: str, text: str) -> InboxMessage:
    return InboxMessage(
        delivery_id=str(uuid.uuid4()),
        thread_id=thread_id,
        channel=Channel.GITHUB,
        author=Author(channel=Channel.GITHUB, external_id="ada", name="ada"),
        text=text,
        repository="acme/widgets",
        reply_to=ReplyAddress(channel=Channel.GITHUB, address={"issue": "7"}),
    )


def _long_turn(script: Script) -> Script:
    for step in range(PLANNED):
        script.tool_call("write_todos", todos=[{"content": f"step {step}", "status": "in_progress"}])
    return script.reply("All planned.")


async def _checkpoints(saver: DrydockRedisSaver, config: RunnableConfig) -> list[str]:
    return [saved.config["configurable"]["checkpoint_id"] async for saved in saver.alist(config)]


class TestCompactingADeepAgentThread:
    async def test_the_state_is_kept_whole_in_one_checkpoint_and_resumes_without_history(
        self, bus: Bus, checkpointer: DrydockRedisSaver, thread_id: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        inbox = Inbox(bus)
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        first = await inbox.append(_message(thread_id, "plan the migration"))
        middleware: list[AgentMiddleware[Any, Any, Any]] = [Planning(), InboxInjection(inbox, thread_id)]
        async with ScriptedModelServer(_long_turn(Script()).reply("Done again.")) as server:
            agent: CompiledStateGraph[Any, Any, Any, Any] = create_deep_agent(
                chat_model(server),
                [],
                middleware=middleware,
                checkpointer=checkpointer,
            )
            await agent.ainvoke({"messages": []}, config)
            latest = await checkpointer.aget_tuple(config)
            assert latest is not None
            # The latest checkpoint does not hold the messages: loading it walks the history.
            assert "messages" not in latest.checkpoint["channel_values"]
            assert "messages" in latest.metadata.get("counters_since_delta_snapshot", {})
            before = (await agent.aget_state(config)).values
            assert len(await _checkpoints(checkpointer, config)) > 2 * PLANNED

            deleted = await checkpointer.acompact(config, agent.channels)

            assert len(await _checkpoints(checkpointer, config)) == 1
            assert deleted > 2 * PLANNED
            compacted = await checkpointer.aget_tuple(config)
            assert compacted is not None
            assert compacted.checkpoint["id"] == latest.checkpoint["id"]
            assert compacted.metadata.get("counters_since_delta_snapshot") is None
            assert {k: v for k, v in compacted.metadata.items() if k != "counters_since_delta_snapshot"} == {
                k: v for k, v in latest.metadata.items() if k != "counters_since_delta_snapshot"
            }
            reads = HistoryReads(monkeypatch, checkpointer)
            after = (await agent.aget_state(config)).values
            assert after == before
            assert after["inbox_cursor"] == first.seq
            assert after["todos"] == [{"content": f"step {PLANNED - 1}", "status": "in_progress"}]
            assert len(after["messages"]) == 2 * PLANNED + 2
            assert reads.calls == 0

            # The thread goes on from the compacted checkpoint, with its whole conversation.
            second = await inbox.append(_message(thread_id, "and the rollback"))
            await agent.ainvoke({"messages": []}, config)
            assert reads.calls == 0
            sent = server.requests[-1]
            assert len(sent.messages) == len(before["messages"]) + 2  # the system prompt, the new message
            assert sum(1 for m in sent.messages if m.get("role") == "tool") == PLANNED
            final = (await agent.aget_state(config)).values
            assert final["messages"][: len(before["messages"])] == before["messages"]
            assert isinstance(final["messages"][-2], HumanMessage)
            assert final["inbox_cursor"] == second.seq
            assert sum(1 for m in final["messages"] if isinstance(m, ToolMessage)) == PLANNED

            assert await checkpointer.acompact(config, agent.channels) > 0
            assert len(await _checkpoints(checkpointer, config)) == 1
            assert (await agent.aget_state(config)).values == final


class TestACompactionCutShort:
    async def test_snapshots_written_and_nothing_deleted_load_as_before(
        self, checkpointer: DrydockRedisSaver, thread_id: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        checkpointer.history_page = 4
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        graph = _graph(checkpointer)
        for turn in range(9):
            await graph.ainvoke(Log(lines=[f"turn {turn}"]), config)
        ids = await _checkpoints(checkpointer, config)
        states = {cid: (await graph.aget_state(_at(config, cid))).values for cid in ids}

        # The first step alone, as a worker that died before deleting anything leaves it.
        assert await checkpointer.snapshot_delta_channels(thread_id, "", graph.channels) == ["lines"]

        assert await _checkpoints(checkpointer, config) == ids
        reads = HistoryReads(monkeypatch, checkpointer)
        assert (await graph.aget_state(config)).values == states[ids[0]]
        assert reads.calls == 0
        # Every older checkpoint still reads its own state, those sharing the latest's version too.
        for cid in ids:
            assert (await graph.aget_state(_at(config, cid))).values == states[cid]
        # Nothing left to snapshot; the next compaction deletes the rest.
        assert await checkpointer.snapshot_delta_channels(thread_id, "", graph.channels) == []
        assert await checkpointer.acompact(config, graph.channels) == len(ids) - 1
        assert (await graph.aget_state(config)).values == states[ids[0]]
        await graph.ainvoke(Log(lines=["turn 9"]), config)
        assert len((await graph.aget_state(config)).values["lines"]) == 30

    async def test_a_thread_without_checkpoints_or_history_is_left_alone(
        self, checkpointer: DrydockRedisSaver, thread_id: str
    ) -> None:
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        graph = _graph(checkpointer)
        assert await checkpointer.acompact(config, graph.channels) == 0
        await graph.ainvoke(Log(lines=["only turn"]), config)
        count = len(await _checkpoints(checkpointer, config))
        assert await checkpointer.acompact(config, graph.channels) == count - 1
        assert (await graph.aget_state(config)).values == {"lines": ["only turn", "first 1", "second 2"], "turns": 1}


class TestExpiry:
    async def test_what_compaction_writes_expires_as_the_saver_says(
        self, checkpointer: DrydockRedisSaver, thread_id: str
    ) -> None:
        saver = DrydockRedisSaver(checkpointer.client, prefix=checkpointer.prefix, ttl=3600)
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        graph = _graph(saver)
        for turn in range(3):
            await graph.ainvoke(Log(lines=[f"turn {turn}"]), config)
        assert await saver.acompact(config, graph.channels) > 0
        keys = [key async for key in saver.client.scan_iter(match=f"*{thread_id}*", count=1000)]
        assert keys
        for key in keys:
            assert 0 < await saver.client.ttl(key) <= 3600, key
        assert len((await graph.aget_state(config)).values["lines"]) == 9


class TestOneChannel:
    async def test_each_checkpoint_reads_the_value_its_tuple_holds(
        self, checkpointer: DrydockRedisSaver, thread_id: str
    ) -> None:
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        assert await checkpointer.aget_channel_value(config, "turns", 0) == 0
        graph = _graph(checkpointer)
        for turn in range(3):
            await graph.ainvoke(Log(lines=[f"turn {turn}"]), config)
        latest = await checkpointer.aget_tuple(config)
        assert latest is not None
        assert (
            await checkpointer.aget_channel_value(config, "turns") == latest.checkpoint["channel_values"]["turns"] == 3
        )
        async for saved in checkpointer.alist(config):
            held = saved.checkpoint["channel_values"].get("turns", "none")
            assert await checkpointer.aget_channel_value(saved.config, "turns", "none") == held
        assert await checkpointer.aget_channel_value(config, "nothing", "none") == "none"
        assert await checkpointer.aget_channel_value(_at(config, "unknown"), "turns", "none") == "none"


def _at(config: RunnableConfig, checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {**config["configurable"], "checkpoint_id": checkpoint_id}}


class TestSubgraphs:
    async def test_the_root_is_compacted_and_the_subgraphs_namespaces_are_left_to_keep_latest(
        self, checkpointer: DrydockRedisSaver, thread_id: str
    ) -> None:
        builder = StateGraph(Log)
        builder.add_node("inner", _graph_without_saver())
        builder.add_edge(START, "inner")
        builder.add_edge("inner", END)
        outer = builder.compile(checkpointer=checkpointer)
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        for turn in range(9):
            await outer.ainvoke(Log(lines=[f"turn {turn}"]), config)
        root: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        inner = [ns for ns in await checkpointer._namespaces(thread_id) if ns]
        assert len(inner) == 9
        kept = {ns: len(await _checkpoints(checkpointer, _in(config, ns))) for ns in inner}
        before = (await outer.aget_state(config)).values

        await checkpointer.acompact(config, outer.channels)

        assert len(await _checkpoints(checkpointer, root)) == 1
        assert (await outer.aget_state(config)).values == before
        # A subgraph's run is shorter than its delta channel's first snapshot: keep_latest keeps it.
        assert {ns: len(await _checkpoints(checkpointer, _in(config, ns))) for ns in inner} == kept


def _in(config: RunnableConfig, ns: str) -> RunnableConfig:
    return {"configurable": {**config["configurable"], "checkpoint_ns": ns}}
