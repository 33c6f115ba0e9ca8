"""Middleware 7: an empty model reply (no text, no tool calls) is replaced with a synthetic
tool call, so work never ends silently.

With open items in the plan (``todos`` not completed) the call is ``continue_working`` naming
the next item; otherwise it is ``confirm_completion``, whose answer asks the model to finish
its role's delivery or to say what it did: the coder's is the push, the pull request and the
reply; the reviewer's is the published review (it never commits, pushes or opens a pull
request); the analyzer's is the saved guidelines. Both tools belong to this
middleware and are hidden from the model; they only answer synthetic calls. After
``max_nudges`` synthetic calls in a row the model is stuck: :class:`EmptyReplies` is raised.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from drydock.roles import Role

CONTINUE = "continue_working"
CONFIRM = "confirm_completion"
NUDGE_TOOLS = frozenset({CONTINUE, CONFIRM})


class EmptyReplies(RuntimeError):
    """The model kept answering with empty replies after being nudged."""


async def _continue_working(next_step: str = "") -> str:
    step = f" The next open item is: {next_step}." if next_step else ""
    return (
        "Your last reply was empty, but the work is not finished." + step + " Continue now: take the next step "
        "with your tools. Do not end your turn until the work is done."
    )


COMPLETION: dict[Role, str] = {
    Role.CODER: (
        "Your last reply was empty. If the work is complete, make sure it is delivered: changes committed and "
        "pushed, the pull request opened or updated, and a reply posted to the conversation it came from; then "
        "end with a short summary of what you did. If anything is left, continue with your tools."
    ),
    Role.REVIEWER: (
        "Your last reply was empty. If the review is complete, make sure it is published: the findings recorded "
        "and `publish_review` called once with a short summary; then end with a one-paragraph summary. You only "
        "read: change no files. If anything is left, continue with your tools."
    ),
    Role.ANALYZER: (
        "Your last reply was empty. If the analysis is complete, make sure the guidelines are saved with "
        "`save_guidelines`; then end with a short summary of what you learned. If anything is left, continue "
        "with your tools."
    ),
}
"""The answer to ``confirm_completion``, per role: what delivering means for it."""


def _nudge_tools(completion: str) -> tuple[BaseTool, ...]:
    async def _confirm_completion() -> str:
        return completion

    return (
        StructuredTool.from_function(
            coroutine=_continue_working, name=CONTINUE, description="Answer to an empty reply: continue the work."
        ),
        StructuredTool.from_function(
            coroutine=_confirm_completion, name=CONFIRM, description="Answer to an empty reply: confirm completion."
        ),
    )


# Built once per role: every run binds the same schema objects, so their converted schemas and
# token counts are computed once per process (see drydock.models.tool_identity).
_TOOLS: dict[Role, tuple[BaseTool, ...]] = {role: _nudge_tools(text) for role, text in COMPLETION.items()}


def _is_empty(message: AIMessage) -> bool:
    return not message.tool_calls and not message.invalid_tool_calls and not message.text.strip()


def _trailing_nudges(messages: Sequence[BaseMessage]) -> int:
    count = 0
    index = len(messages) - 1
    while index >= 1:
        answer, call = messages[index], messages[index - 1]
        if not (isinstance(answer, ToolMessage) and answer.name in NUDGE_TOOLS and isinstance(call, AIMessage)):
            break
        count += 1
        index -= 2
    return count


def _next_open_item(state: AgentState[Any]) -> str | None:
    todos = cast("dict[str, Any]", state).get("todos")
    if not isinstance(todos, list):
        return None
    for todo in todos:
        if isinstance(todo, dict) and todo.get("status") != "completed":
            return str(todo.get("content", ""))
    return None


def _tool_name(tool: BaseTool | dict[str, Any]) -> str | None:
    return tool.name if isinstance(tool, BaseTool) else None


class EmptyReplyNudge(AgentMiddleware[AgentState[Any], Any, Any]):
    """Turns an empty reply into ``continue_working`` or ``confirm_completion`` (answered for ``role``)."""

    def __init__(self, *, max_nudges: int = 3, role: Role = Role.CODER) -> None:
        super().__init__()
        if max_nudges < 1:
            raise ValueError(f"max_nudges must be at least 1, not {max_nudges}")
        self.max_nudges = max_nudges
        self.role = role
        self.tools = list(_TOOLS[role])

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        visible = [tool for tool in request.tools if _tool_name(tool) not in NUDGE_TOOLS]
        response = await handler(request.override(tools=visible))
        replies = [m for m in response.result if isinstance(m, AIMessage)]
        if not replies or not _is_empty(replies[-1]):
            return response
        if _trailing_nudges(request.messages) >= self.max_nudges:
            raise EmptyReplies(f"the model answered with an empty reply {self.max_nudges + 1} times in a row")
        reply = replies[-1]
        open_item = _next_open_item(request.state)
        name, args = (CONTINUE, {"next_step": open_item}) if open_item is not None else (CONFIRM, {})
        nudge = reply.model_copy(
            update={
                "content": "",
                "tool_calls": [
                    ToolCall(name=name, args=args, id=f"call_nudge_{uuid.uuid4().hex[:16]}", type="tool_call")
                ],
            }
        )
        result = [nudge if message is reply else message for message in response.result]
        return ModelResponse(result=result, structured_response=response.structured_response)
