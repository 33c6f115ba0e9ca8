"""The coder's plan: the framework's todo tool (``write_todos``, LangChain's
``TodoListMiddleware``, which deepagents gives only its Codex profile), whatever the model.

The framework's middleware checks each reply for parallel ``write_todos`` calls in an
``after_model`` hook, a graph node with its own checkpoint on every agent step. :class:`Planning`
makes the same check inside the model call: a reply with more than one ``write_todos`` call is
answered with the framework's error for each of them, in the model node's one state update,
so the tool node runs none of them. It keeps the framework's name, so a profile that adds the
framework's own takes it in place.

Under plan approval (:mod:`drydock.threads.approvals`) it also refuses the framework's file
writes (``write_file``, ``edit_file``) while the thread's plan waits for its owner: ``refusal``
answers why, or ``None`` when writing is allowed. ``execute`` cannot be policed this way (a shell
writes files too); the credential proxy, which refuses the thread's pushes, is the real gate.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse, TodoListMiddleware
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command

PARALLEL_ERROR = (
    "Error: The `write_todos` tool should never be called multiple times in parallel. Please call it only once "
    "per model invocation to update the todo list."
)


WRITING_TOOLS = frozenset({"write_file", "edit_file"})


class Planning(TodoListMiddleware):
    """``write_todos`` and its system prompt, with the one-call-per-reply check in the model call,
    and file writes refused while ``refusal`` says the plan waits for approval."""

    after_model = AgentMiddleware.after_model
    aafter_model = AgentMiddleware.aafter_model

    def __init__(self, *, refusal: Callable[[], Awaitable[str | None]] | None = None) -> None:
        super().__init__()
        self._refusal = refusal

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        call = request.tool_call
        if self._refusal is not None and call["name"] in WRITING_TOOLS:
            refused = await self._refusal()
            if refused is not None:
                return ToolMessage(refused, tool_call_id=call["id"], name=call["name"], status="error")
        return await handler(request)

    @property
    def name(self) -> str:
        return TodoListMiddleware.__name__

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage:
        response = await super().awrap_model_call(request, handler)
        if isinstance(response, AIMessage):
            response = ModelResponse(result=[response])
        replies = [m for m in response.result if isinstance(m, AIMessage)]
        calls = [c for c in replies[-1].tool_calls if c["name"] == "write_todos"] if replies else []
        if len(calls) < 2:
            return response
        errors = [ToolMessage(PARALLEL_ERROR, tool_call_id=call["id"], status="error") for call in calls]
        return ModelResponse(result=[*response.result, *errors], structured_response=response.structured_response)
