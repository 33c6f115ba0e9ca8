"""A count of a saver's delta-channel history walks, for tests that a load reads no history."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import DeltaChannelHistory

from drydock.checkpoints import DrydockRedisSaver


class HistoryReads:
    """Counts the saver's delta-channel history walks (what loading a thread without a snapshot
    at its latest checkpoint costs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, saver: DrydockRedisSaver) -> None:
        self.calls = 0
        walk = saver.aget_delta_channel_history

        async def counted(*, config: RunnableConfig, channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
            self.calls += 1
            return await walk(config=config, channels=channels)

        monkeypatch.setattr(saver, "aget_delta_channel_history", counted)
