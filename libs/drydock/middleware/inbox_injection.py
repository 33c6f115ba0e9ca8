"""Middleware 5: inject the thread's queued inbox messages before the next model call.

The inbox cursor (the stream sequence of the last injected message) lives in the graph state,
and the messages and the new cursor are one state update, so they are checkpointed together: a
message is injected exactly once, also when a run is resumed after a crash. An injected message
keeps a stable id (``inbox-{seq}``), so even a repeated write could not duplicate it.

The worker passes no messages of its own: the first model call of a run injects everything the
thread received since the last run.
"""

from __future__ import annotations

from typing import Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

from drydock.bus.envelopes import InboxMessage
from drydock.middleware.protocols import InboxReader


class InboxState(AgentState[Any]):
    inbox_cursor: NotRequired[int]
    """Sequence of the last inbox message injected into the conversation (0: none yet)."""


def inbox_message_text(message: InboxMessage) -> str:
    """How an inbound message reads to the model: who wrote it, where, and what."""
    where = message.channel.value + (f" ({message.repository})" if message.repository else "")
    return f"{message.author.name} wrote on {where}:\n\n{message.text}"


def inbox_message_id(seq: int) -> str:
    return f"inbox-{seq}"


class InboxInjection(AgentMiddleware[InboxState, Any, Any]):
    """Before each model call, appends the messages after ``inbox_cursor`` and advances it."""

    state_schema = InboxState

    def __init__(self, inbox: InboxReader, thread_id: str) -> None:
        super().__init__()
        self.inbox = inbox
        self.thread_id = thread_id

    async def abefore_model(self, state: InboxState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        queued = await self.inbox.read_after(self.thread_id, state.get("inbox_cursor", 0))
        if not queued:
            return None
        messages = [
            HumanMessage(content=inbox_message_text(stored.message), id=inbox_message_id(stored.seq))
            for stored in queued
        ]
        return {"messages": messages, "inbox_cursor": queued[-1].seq}
