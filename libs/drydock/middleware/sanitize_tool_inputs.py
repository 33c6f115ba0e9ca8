"""Middleware 1: sanitize and normalize tool inputs.

On the model's reply (the outermost model wrapper, so it sees the final reply):

- a tool name with surrounding whitespace or a namespace (``functions.execute``) becomes the
  tool's name when that names a known tool;
- a call whose arguments are not valid JSON (an *invalid* tool call, which would otherwise end
  the run, since the agent loop only follows valid calls) is repaired when the JSON is only
  wrapped (code fences, text around the object); otherwise it becomes a call marked
  :data:`MALFORMED_ARGUMENTS`, answered with an error telling the model to resend it. It is
  never run with guessed arguments.

On each tool call, before it runs: NUL characters are removed from string arguments, and
arguments that are ``null`` but optional in the tool's schema are dropped so their defaults apply,
and secrets are redacted (:class:`~drydock.redaction.Redactor`) from the arguments of every tool
whose words leave Drydock (comments, pull requests, reviews and findings, Slack and Linear
messages, web requests): all but the tools working inside the sandbox (:data:`INTERNAL_TOOLS`).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command
from pydantic import BaseModel

from drydock.models import SchemaDerived
from drydock.redaction import Redactor

INTERNAL_TOOLS = frozenset(
    {"execute", "read_file", "write_file", "edit_file", "ls", "glob", "grep", "git", "task", "write_todos"}
)
"""Tools whose arguments stay in the sandbox or the run: not redacted (a file the agent edits
must keep its bytes)."""

MALFORMED_ARGUMENTS = "__drydock_malformed_arguments__"
"""Argument key of a call whose arguments could not be read; its value says why."""

_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*(.*?)\s*```\s*$", re.DOTALL)


def _tool_names(tools: Iterable[BaseTool | dict[str, Any]]) -> set[str]:
    names = set()
    for tool in tools:
        if isinstance(tool, BaseTool):
            names.add(tool.name)
        elif isinstance(function := tool.get("function"), dict) and "name" in function:
            names.add(str(function["name"]))
        elif "name" in tool:
            names.add(str(tool["name"]))
    return names


def _name(raw: str | None, known: set[str]) -> str:
    name = (raw or "").strip()
    if name in known:
        return name
    tail = name.rsplit(".", 1)[-1].rsplit(":", 1)[-1].strip()
    return tail if tail in known else name


def _parse_object(text: str) -> tuple[dict[str, Any] | None, str]:
    """``text`` as a JSON object, also when fenced or surrounded by prose; else None and why."""
    if not text.strip():
        return {}, ""
    candidates = [text.strip()]
    if fenced := _FENCE.match(text):
        candidates.append(fenced.group(1))
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    problem = "they are not a JSON object"
    for index, candidate in enumerate(candidates):
        try:
            value = json.loads(candidate)
        except ValueError as error:
            if index == 0:
                problem = f"they are not valid JSON ({error})"
            continue
        if isinstance(value, dict):
            return value, ""
    return None, problem


def _sanitized_reply(message: AIMessage, known: set[str]) -> AIMessage | None:
    """The reply with its tool calls normalized; None when nothing needed changing."""
    calls = [
        ToolCall(
            name=_name(call["name"], known),
            args=call["args"],
            id=call["id"] or f"call_{uuid.uuid4().hex[:24]}",
            type="tool_call",
        )
        for call in message.tool_calls
    ]
    for invalid in message.invalid_tool_calls:
        raw = invalid.get("args") or ""
        parsed, problem = _parse_object(raw)
        args = parsed if parsed is not None else {MALFORMED_ARGUMENTS: f"{problem}: {raw[:200]!r}"}
        call_id = invalid.get("id") or f"call_{uuid.uuid4().hex[:24]}"
        calls.append(ToolCall(name=_name(invalid.get("name"), known), args=args, id=call_id, type="tool_call"))
    if calls == message.tool_calls and not message.invalid_tool_calls:
        return None
    return message.model_copy(update={"tool_calls": calls, "invalid_tool_calls": []})


def _clean(value: object) -> object:
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, list):
        return [_clean(item) for item in value]
    if isinstance(value, dict):
        return {key: _clean(item) for key, item in value.items()}
    return value


def _read_required(tool: BaseTool) -> frozenset[str] | None:
    # ``tool_call_schema`` builds a pydantic model the first time each tool instance is asked,
    # and every run has new instances: about a millisecond on each run's first call of a tool.
    schema = tool.tool_call_schema
    if isinstance(schema, dict):
        return frozenset(schema.get("required", []))
    if issubclass(schema, BaseModel):
        return frozenset(name for name, spec in schema.model_fields.items() if spec.is_required())
    return None


_REQUIRED: SchemaDerived[frozenset[str] | None] = SchemaDerived()


def _required(tool: BaseTool) -> frozenset[str] | None:
    """The tool's required arguments; None when its schema is of a kind we cannot read."""
    return _REQUIRED.get(tool, lambda: _read_required(tool))


class SanitizeToolInputs(AgentMiddleware[AgentState[Any], Any, Any]):
    """Normalizes the tool calls in the model's reply and the arguments of each call it runs;
    with a ``redactor``, redacts secrets from the arguments of outbound tools."""

    def __init__(self, redactor: Redactor | None = None, thread_id: str | None = None) -> None:
        super().__init__()
        self.redactor = redactor
        self.thread_id = thread_id

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        response = await handler(request)
        known = _tool_names(request.tools)
        result: list[BaseMessage] = []
        for message in response.result:
            fixed = _sanitized_reply(message, known) if isinstance(message, AIMessage) else None
            result.append(fixed or message)
        return ModelResponse(result=result, structured_response=response.structured_response)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        call = request.tool_call
        if MALFORMED_ARGUMENTS in call["args"]:
            return ToolMessage(
                content=f"Error: the {call['name']} call was not run: its arguments could not be read, "
                f"{call['args'][MALFORMED_ARGUMENTS]}. "
                "Send the call again with its arguments as one valid JSON object.",
                tool_call_id=call["id"],
                name=call["name"],
                status="error",
            )
        arguments = {key: _clean(value) for key, value in call["args"].items()}
        if self.redactor is not None and call["name"] not in INTERNAL_TOOLS:
            arguments = self.redactor.redact_value(arguments, where=f"tool {call['name']}", thread_id=self.thread_id)
        required = _required(request.tool) if request.tool is not None else None
        if required is not None:
            arguments = {k: v for k, v in arguments.items() if v is not None or k in required}
        if arguments != call["args"]:
            request = request.override(tool_call={**call, "args": arguments})
        return await handler(request)
