"""A finished run compacts its thread's checkpoints: the next run of the thread loads one
checkpoint holding the whole conversation and walks back no history, and the inbox cursor the
loop reads before the claim is the checkpoint's own.

The run loop runs whole, as in ``test_run_endings``: real NATS and Valkey, a real local
sandbox, the coder's real graph against the scripted model server.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig

from drydock.bus import Author, Channel, InboxMessage, ReplyAddress
from drydock.checkpoints import DrydockRedisSaver
from drydock.threads import Inbox
from tests.checkpoints.history_reads import HistoryReads
from tests.fakes.openai_server import Script
from tests.sandbox.conftest import bwrap, sandbox_root  # noqa: F401 (fixtures)
from tests.worker.test_run_endings import CHANNEL, Rig, Rigging, Thread, rig, root  # noqa: F401 (fixtures)

PLANNED = 30
"""``write_todos`` calls in the first turn: with the replies, past the framework's snapshot of
``messages`` (every 50 updates) with more after it."""


def _script() -> Script:
    script = Script()
    for step in range(PLANNED):
        script.tool_call("write_todos", todos=[{"content": f"step {step}", "status": "in_progress"}])
    return script.reply("Planned.").reply("Answered the follow-up.")


async def _follow_up(r: Rig, thread: Thread) -> int:
    reply_to = ReplyAddress(channel=Channel.SLACK, address={"team": "T0", "channel": CHANNEL, "thread_ts": thread.ts})
    stored = await Inbox(r.bus).append(
        InboxMessage(
            delivery_id=uuid.uuid4().hex,
            thread_id=thread.id,
            channel=Channel.SLACK,
            author=Author(channel=Channel.SLACK, external_id="U0ADA", name="ada"),
            text="@drydock and one more thing",
            reply_to=reply_to,
        )
    )
    return stored.seq


class TestCompaction:
    async def test_the_next_run_loads_one_checkpoint_without_walking_the_history(
        self,
        rig: Rigging,  # noqa: F811 (the imported fixture)
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        async with rig(_script()) as r:
            thread = await r.thread()
            await r.run(thread)
            saver = r.runs.parts.checkpointer
            assert isinstance(saver, DrydockRedisSaver)
            config: RunnableConfig = {"configurable": {"thread_id": thread.id}}
            assert len([saved async for saved in saver.alist(config)]) == 1
            latest = await saver.aget_tuple(config)
            assert latest is not None
            values: dict[str, Any] = latest.checkpoint["channel_values"]
            assert len(values["messages"].value) == 2 * PLANNED + 2
            assert values["todos"] == [{"content": f"step {PLANNED - 1}", "status": "in_progress"}]
            assert await r.runs._saved_cursor(config) == values["inbox_cursor"] == thread.seq

            reads = HistoryReads(monkeypatch, saver)
            walks_before_compacting: list[int] = []
            compact = saver.acompact

            async def compacting(config: RunnableConfig, channels: Mapping[str, object]) -> int:
                walks_before_compacting.append(reads.calls)
                return await compact(config, channels)

            monkeypatch.setattr(saver, "acompact", compacting)
            seq = await _follow_up(r, thread)
            assert await r.run(thread) == seq

            # The run read no history; its end's compaction walks back its own steps only.
            assert walks_before_compacting == [0]
            assert reads.calls == 1
            sent = r.model.requests[-1]
            assert sum(1 for m in sent.messages if m.get("role") == "tool") == PLANNED
            assert "and one more thing" in sent.texts("user")[-1]
            assert len([saved async for saved in saver.alist(config)]) == 1
            assert await r.runs._saved_cursor(config) == seq
