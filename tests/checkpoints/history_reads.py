"""A count of a saver's delta-channel history walks, for tests that a load reads no history."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from langgraph.checkpoint.base import DeltaChannelHistory

from drydock.checkpoints import DrydockRedisSaver


class HistoryReads:
    """Counts the saver's delta-channel history walks (what loading a thread without a snapshot
    at its latest checkpoint costs, and what compacting it reads): LangGraph's loads and the
    saver's compaction both walk through ``_history``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, saver: DrydockRedisSaver) -> None:
        self.calls = 0
        walk = saver._history

        async def counted(
            thread_id: str, ns: str, cursor: str | None, channels: Sequence[str]
        ) -> dict[str, DeltaChannelHistory]:
            self.calls += 1
            return await walk(thread_id, ns, cursor, channels)

        monkeypatch.setattr(saver, "_history", counted)
