"""Middleware 3: a tool that raises becomes an error tool message the model can act on,
instead of an exception that ends the run. Interrupts and other graph control flow pass.

It also binds the call's position for the effects layer (:mod:`drydock.effects.calls`: the
graph step and the call's index in the model's message), since it wraps every tool call of every
role: a replayed call, even one the model made again under a new id, keys its external writes
by the same position. For the same reason each tool call's trace span starts here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.messages import ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from drydock.effects import bound_call
from drydock.effects.calls import position_in
from drydock.telemetry.tracing import tool_span

log = structlog.get_logger(__name__)

MAX_ERROR_CHARS = 2000


class ToolErrorsAsMessages(AgentMiddleware[AgentState[Any], Any, Any]):
    """Catches what a tool raises and answers its call with ``status="error"``."""

    def __init__(self, thread_id: str) -> None:
        super().__init__()
        self.thread_id = thread_id

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        try:
            call_id = str(request.tool_call["id"])
            config = request.runtime.config if request.runtime is not None else None
            with bound_call(position_in(config, request.state, call_id)), tool_span(request.tool_call["name"], call_id):
                return await handler(request)
        except GraphBubbleUp:
            raise
        except Exception as error:
            name = request.tool_call["name"]
            log.warning("tool failed", thread_id=self.thread_id, tool=name, error=repr(error))
            detail = str(error)[:MAX_ERROR_CHARS] or "(no message)"
            return ToolMessage(
                content=f"Error: the {name} tool failed with {type(error).__name__}: {detail}",
                tool_call_id=request.tool_call["id"],
                name=name,
                status="error",
            )
