"""Middleware 3: a tool that raises becomes an error tool message the model can act on,
instead of an exception that ends the run. Interrupts and other graph control flow pass.

It also binds the call's id for the effects layer (:mod:`drydock.effects`), since it wraps
every tool call of every role: a replayed call keys its external writes by the same id."""

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
            with bound_call(str(request.tool_call["id"])):
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
