"""A run loads its thread's latest checkpoint while it waits on its sandbox
(:meth:`DrydockRedisSaver.preloaded`); the graph's first load takes that result."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig

from drydock.checkpoints import DrydockRedisSaver
from tests.checkpoints.test_delta_history import _graph


class Loads:
    """Counts the loads of a thread's latest checkpoint from Redis."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = DrydockRedisSaver._latest_raw

        async def counted(saver: DrydockRedisSaver, thread_id: str, ns: str) -> Any:
            self.count += 1
            return await original(saver, thread_id, ns)

        monkeypatch.setattr(DrydockRedisSaver, "_latest_raw", counted)


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


async def _latest_id(checkpointer: DrydockRedisSaver, thread_id: str) -> str:
    """The id of the thread's latest checkpoint, read without :meth:`DrydockRedisSaver.aget_tuple`."""
    async for saved in checkpointer.alist(_config(thread_id), limit=1):
        return str(saved.checkpoint["id"])
    raise AssertionError("the thread has no checkpoint")


class TestPreloaded:
    async def test_the_next_load_of_the_latest_checkpoint_takes_the_preload(
        self, checkpointer: DrydockRedisSaver, thread_id: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        graph = _graph(checkpointer)
        await graph.ainvoke({"lines": ["start"]}, _config(thread_id))
        expected = await checkpointer.aget_tuple(_config(thread_id))
        loads = Loads(monkeypatch)

        async with checkpointer.preloaded(_config(thread_id)):
            taken = await checkpointer.aget_tuple(_config(thread_id))
            assert loads.count == 1
            again = await checkpointer.aget_tuple(_config(thread_id))
            assert loads.count == 2

        assert taken == expected == again

    async def test_a_graph_run_in_the_block_loads_the_thread_once(
        self, checkpointer: DrydockRedisSaver, thread_id: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        graph = _graph(checkpointer)
        await graph.ainvoke({"lines": ["start"]}, _config(thread_id))
        # As at a run's end: the next load reads no history.
        await checkpointer.acompact(_config(thread_id), graph.channels)
        loads = Loads(monkeypatch)

        async with checkpointer.preloaded(_config(thread_id)):
            result = await graph.ainvoke({"lines": ["more"]}, _config(thread_id))

        assert loads.count == 1
        assert result["lines"] == ["start", "first 1", "second 2", "more", "first 4", "second 5"]

    async def test_a_load_of_another_checkpoint_or_thread_does_not_take_it(
        self, checkpointer: DrydockRedisSaver, thread_id: str
    ) -> None:
        graph = _graph(checkpointer)
        for text in ("one", "two"):
            await graph.ainvoke({"lines": [text]}, _config(thread_id))
        earliest = [saved async for saved in checkpointer.alist(_config(thread_id))][-1]

        async with checkpointer.preloaded(_config(thread_id)):
            by_id = await checkpointer.aget_tuple(earliest.config)
            other = await checkpointer.aget_tuple(_config(f"{thread_id}-other"))
            latest = await checkpointer.aget_tuple(_config(thread_id))

        assert by_id is not None
        assert by_id.config == earliest.config
        assert other is None
        assert latest is not None
        assert latest.checkpoint["id"] == await _latest_id(checkpointer, thread_id) != earliest.checkpoint["id"]

    async def test_an_untaken_preload_is_dropped_and_later_writes_are_read(
        self, checkpointer: DrydockRedisSaver, thread_id: str
    ) -> None:
        graph = _graph(checkpointer)
        await graph.ainvoke({"lines": ["one"]}, _config(thread_id))

        async with checkpointer.preloaded(_config(thread_id)):
            preloaded_id = await _latest_id(checkpointer, thread_id)
        await graph.ainvoke({"lines": ["two"]}, _config(thread_id))
        latest = await checkpointer.aget_tuple(_config(thread_id))

        assert latest is not None
        assert latest.checkpoint["id"] == await _latest_id(checkpointer, thread_id) != preloaded_id

    async def test_a_failed_preload_fails_the_load_that_takes_it(
        self, checkpointer: DrydockRedisSaver, thread_id: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        async def unreachable(saver: DrydockRedisSaver, thread_id: str, ns: str) -> Any:
            raise ConnectionError("store unreachable")

        monkeypatch.setattr(DrydockRedisSaver, "_latest_raw", unreachable)
        async with checkpointer.preloaded(_config(thread_id)):
            with pytest.raises(ConnectionError, match="unreachable"):
                await checkpointer.aget_tuple(_config(thread_id))
        async with checkpointer.preloaded(_config(thread_id)):
            pass  # failed and never taken: dropped without a complaint
