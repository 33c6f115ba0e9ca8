"""Middleware 5: inject the thread's queued inbox messages before the next model call.

The inbox cursor (the stream sequence of the last injected message) lives in the graph state.
The injection wraps the model call: the queued messages join the request, and they and the new
cursor are written with the model's reply, in the model node's one state update, so they are
checkpointed together: a message is injected exactly once, also when a run is resumed after a
crash (a call that never finished wrote nothing, and the resumed call injects the messages
again). An injected message keeps a stable id (``inbox-{seq}``), so even a repeated write could
not duplicate it. A ``before_model`` hook would do the same at the cost of a graph node, with
its own checkpoint, on every step.

The worker passes no messages of its own: the first model call of a run injects everything the
thread received since the last run. A subagent's injection has no inbox (``None``): the
conversation belongs to the agent that called ``task``, which reads the inbox at its next call.
The model call's trace span is linked to the traces the injected messages came in (a follow-up's
webhook), as the run's trace is its wake's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NotRequired, cast

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelCallResult,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import HumanMessage
from langgraph.types import Command

from drydock.bus.envelopes import InboxMessage
from drydock.middleware.protocols import InboxReader
from drydock.telemetry.tracing import link_to


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
    """At each model call, appends the messages after ``inbox_cursor`` and advances it; does
    nothing when ``inbox`` is None."""

    state_schema = InboxState

    def __init__(self, inbox: InboxReader | None, thread_id: str) -> None:
        super().__init__()
        self.inbox = inbox
        self.thread_id = thread_id

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        if self.inbox is None:
            return await handler(request)
        queued = await self.inbox.read_after(self.thread_id, cast(InboxState, request.state).get("inbox_cursor", 0))
        if not queued:
            return await handler(request)
        link_to(stored.headers for stored in queued)
        messages = [
            HumanMessage(content=inbox_message_text(stored.message), id=inbox_message_id(stored.seq))
            for stored in queued
        ]
        response = await handler(request.override(messages=[*request.messages, *messages]))
        # In the state the messages come before the reply that answered them.
        answered = ModelResponse(result=[*messages, *response.result], structured_response=response.structured_response)
        return ExtendedModelResponse(model_response=answered, command=Command(update={"inbox_cursor": queued[-1].seq}))
