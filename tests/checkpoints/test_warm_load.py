"""The first load of a thread after its compaction takes the snapshots compaction stored instead
of decoding them, once, and only while Redis holds exactly what was stored."""

from __future__ import annotations

from typing import Any

import pytest
from deepagents import create_deep_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.graph.state import CompiledStateGraph

from drydock.bus import Bus
from drydock.checkpoints import DrydockRedisSaver
from drydock.middleware.inbox_injection import InboxInjection
from drydock.middleware.planning import Planning
from drydock.threads import Inbox
from tests.checkpoints.test_compaction import PLANNED, _long_turn, _message
from tests.checkpoints.test_delta_history import Log, _graph
from tests.fakes.openai_server import Script, ScriptedModelServer
from tests.middleware.conftest import chat_model


class SnapshotDecodes(SerializerProtocol):
    """A saver's serializer, counting the delta-channel snapshots it decodes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, saver: DrydockRedisSaver) -> None:
        self.inner = saver.serde
        self.count = 0
        monkeypatch.setattr(saver, "serde", self)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self.inner.dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        value = self.inner.loads_typed(data)
        if isinstance(value, _DeltaSnapshot):
            self.count += 1
        return value


def _fresh(saver: DrydockRedisSaver) -> DrydockRedisSaver:
    """A saver on the same keys that has compacted nothing: it decodes what Redis holds."""
    return DrydockRedisSaver(saver.client, prefix=saver.prefix)


def _snapshots(saved: CheckpointTuple) -> int:
    return sum(isinstance(value, _DeltaSnapshot) for value in saved.checkpoint["channel_values"].values())


def _messages(saved: CheckpointTuple | None) -> list[BaseMessage]:
    assert saved is not None
    snapshot = saved.checkpoint["channel_values"]["messages"]
    assert isinstance(snapshot, _DeltaSnapshot)
    return list(snapshot.value)


async def _as_stored(saver: DrydockRedisSaver, config: RunnableConfig) -> CheckpointTuple:
    stored = await _fresh(saver).aget_tuple(config)
    assert stored is not None
    return stored


def _same(loaded: CheckpointTuple | None, stored: CheckpointTuple) -> None:
    assert loaded is not None
    assert loaded.checkpoint == stored.checkpoint
    assert loaded.metadata == stored.metadata
    assert loaded.pending_writes == stored.pending_writes
    assert loaded.parent_config == stored.parent_config


async def _planning_agent(
    server: ScriptedModelServer, inbox: Inbox, checkpointer: DrydockRedisSaver, thread_id: str
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A deep agent that plans, reading ``thread_id``'s inbox, where a first message waits."""
    await inbox.append(_message(thread_id, "plan the migration"))
    middleware: list[AgentMiddleware[Any, Any, Any]] = [Planning(), InboxInjection(inbox, thread_id)]
    return create_deep_agent(chat_model(server), [], middleware=middleware, checkpointer=checkpointer)


class TestTheLoadAfterCompaction:
    async def test_takes_the_stored_snapshots_once_and_later_loads_decode_their_own(
        self, bus: Bus, checkpointer: DrydockRedisSaver, thread_id: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        inbox = Inbox(bus)
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        async with ScriptedModelServer(_long_turn(Script())) as server:
            agent = await _planning_agent(server, inbox, checkpointer, thread_id)
            await agent.ainvoke({"messages": []}, config)
        await checkpointer.acompact(config, agent.channels)
        decodes = SnapshotDecodes(monkeypatch, checkpointer)
        stored = await _as_stored(checkpointer, config)
        assert _snapshots(stored) >= 1
        assert len(_messages(stored)) == 2 * PLANNED + 2
        assert sum(bool(isinstance(m, AIMessage) and m.tool_calls) for m in _messages(stored)) == PLANNED

        warm = await checkpointer.aget_tuple(config)

        assert decodes.count == 0
        _same(warm, stored)
        # What the first load handed out is its own: changing it changes no later load.
        taken = _messages(warm)
        taken[0].content = "changed by the run"
        taken.append(AIMessage(content="added by the run"))
        again = await checkpointer.aget_tuple(config)
        assert decodes.count == _snapshots(stored)
        _same(again, stored)
        assert not {id(m) for m in _messages(again)} & {id(m) for m in taken}

    async def test_a_resumed_run_goes_on_from_it_and_what_the_run_holds_is_never_handed_out(
        self, bus: Bus, checkpointer: DrydockRedisSaver, thread_id: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        inbox = Inbox(bus)
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        async with ScriptedModelServer(_long_turn(_long_turn(Script()))) as server:
            agent = await _planning_agent(server, inbox, checkpointer, thread_id)
            before = len((await agent.ainvoke({"messages": []}, config))["messages"])
            await checkpointer.acompact(config, agent.channels)
            decodes = SnapshotDecodes(monkeypatch, checkpointer)
            await inbox.append(_message(thread_id, "and the rollback"))

            final = await agent.ainvoke({"messages": []}, config)

            assert decodes.count == 0
            assert len(server.requests[PLANNED + 1].messages) == before + 2  # the prompt, the new message
            await checkpointer.acompact(config, agent.channels)
        stored = await _as_stored(checkpointer, config)
        assert _messages(stored) == final["messages"]
        assert len(final["messages"]) == 4 * PLANNED + 4
        # The finished run changes the state it still holds; the next run loads the stored one.
        final["messages"][-1].content = "changed after the run"
        final["messages"].append(AIMessage(content="added after the run"))
        decodes.count = 0
        warm = await agent.aget_state(config)
        assert decodes.count == 0
        assert warm.values["messages"] == _messages(stored)
        assert warm.values["messages"][-1].content == "All planned."


async def _compacted(saver: DrydockRedisSaver, thread_id: str, lines: list[str]) -> RunnableConfig:
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    graph = _graph(saver)
    for line in lines:
        await graph.ainvoke(Log(lines=[line]), config)
    assert await saver.snapshot_delta_channels(thread_id, "", graph.channels) == ["lines"]
    await saver.acompact(config, graph.channels)
    return config


class TestTheBound:
    async def test_only_the_last_threads_compacted_are_kept(
        self, checkpointer: DrydockRedisSaver, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        checkpointer.warm_threads = 2
        threads = [f"bound-{n}-{id(checkpointer)}" for n in range(3)]
        configs = [await _compacted(checkpointer, thread, ["one", "two"]) for thread in threads]
        decodes = SnapshotDecodes(monkeypatch, checkpointer)

        loads = []
        for config in configs:
            before = decodes.count
            _same(await checkpointer.aget_tuple(config), await _as_stored(checkpointer, config))
            loads.append(decodes.count - before)

        assert loads == [1, 0, 0]


class TestAMiss:
    async def test_a_thread_another_saver_wrote_after_compaction_loads_what_it_wrote(
        self, checkpointer: DrydockRedisSaver, thread_id: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        config = await _compacted(checkpointer, thread_id, ["one", "two"])
        other = _fresh(checkpointer)
        await _compacted(other, thread_id, ["three"])
        decodes = SnapshotDecodes(monkeypatch, checkpointer)

        loaded = await checkpointer.aget_tuple(config)

        assert decodes.count == 1
        _same(loaded, await _as_stored(checkpointer, config))
        assert (await _graph(checkpointer).aget_state(config)).values["lines"][-3:] == ["three", "first 7", "second 8"]

    async def test_a_thread_deleted_and_written_again_under_the_same_versions_loads_the_new_values(
        self, checkpointer: DrydockRedisSaver, thread_id: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        config = await _compacted(checkpointer, thread_id, ["one", "two"])
        first = await _as_stored(checkpointer, config)
        other = _fresh(checkpointer)
        await other.adelete_thread(thread_id)
        await _compacted(other, thread_id, ["uno", "dos"])
        decodes = SnapshotDecodes(monkeypatch, checkpointer)
        stored = await _as_stored(checkpointer, config)
        # The same blob keys as those compaction wrote, holding other values.
        assert stored.checkpoint["channel_versions"] == first.checkpoint["channel_versions"]
        assert stored.checkpoint["channel_values"]["lines"] != first.checkpoint["channel_values"]["lines"]

        loaded = await checkpointer.aget_tuple(config)

        assert decodes.count == 1
        _same(loaded, stored)

    async def test_a_thread_deleted_through_the_saver_is_no_longer_kept(
        self, checkpointer: DrydockRedisSaver, thread_id: str
    ) -> None:
        config = await _compacted(checkpointer, thread_id, ["one", "two"])
        await checkpointer.adelete_thread(thread_id)
        assert await checkpointer.aget_tuple(config) is None
        assert not checkpointer._warm
