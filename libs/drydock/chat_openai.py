"""The chat model client Drydock runs its agents with: ``ChatOpenAI`` with three shortcuts.

Kept apart from :mod:`drydock.models` and imported when the first model client is built:
``langchain_openai`` and the OpenAI SDK's types are the largest part of a worker's start-up
import time, and a worker is ready to take wakes before it needs them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_openai import ChatOpenAI
from langchain_openai.chat_models.base import _TOOL_EXTRAS_PASSTHROUGH

from drydock.models import SchemaDerived


class DrydockChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` that sends the conversation and the tools through ``extra_body``.

    The OpenAI SDK walks every request body against its typed parameter definitions before
    sending it; for an agent's growing conversation that walk was 40 % of a step's CPU time here
    (``bench/bench_coder.py``), and it changes nothing in Chat Completions bodies. Keys in
    ``extra_body`` are merged into the JSON as given, so the request on the wire is the same.
    Requests with a ``response_format`` keep the SDK's path: its parsing reads the tools.

    A system message made of plain text blocks, as the agent's middleware leaves it (the prompt,
    then each part a middleware appends, already separated by blank lines), is sent as the one
    string those blocks spell. For each block of a list ``langchain_openai`` asks
    ``langchain_core`` whether it is a data block, which resolves the type hints of every data
    block type again (about 0.18 ms a block here, on every model call).
    """

    def _get_request_payload(self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any) -> dict[str, Any]:
        messages = [_plain_system(message) for message in self._convert_input(input_).to_messages()]
        payload = super()._get_request_payload(messages, stop=stop, **kwargs)
        if "messages" not in payload or "response_format" in payload:
            return payload
        moved = {key: payload.pop(key) for key in ("messages", "tools") if key in payload}
        payload["messages"] = []
        payload["extra_body"] = {**(payload.get("extra_body") or {}), **moved}
        return payload

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """``ChatOpenAI.bind_tools`` with each tool's schema converted once per process.

        The agent binds its tools again before every model call, and converting a tool to its
        JSON schema (through pydantic) was about a tenth of a step's orchestration time.
        Converted tools are dicts in the API's format, which ``bind_tools`` passes through.
        """
        if kwargs.get("response_format") is not None:
            # With a response format the strictness is decided inside; keep that path whole.
            return super().bind_tools(tools, strict=strict, **kwargs)
        return super().bind_tools([_openai_tool(tool, strict) for tool in tools], strict=strict, **kwargs)


def _plain_system(message: BaseMessage) -> BaseMessage:
    """``message``, or the system message its plain text blocks spell as one string."""
    content = message.content
    if not isinstance(message, SystemMessage) or not isinstance(content, list):
        return message
    texts = []
    for block in content:
        # Only a block with nothing but its text: extras (a cache breakpoint) or other types
        # change what is sent.
        if (
            not isinstance(block, dict)
            or block.keys() != {"type", "text"}
            or block["type"] != "text"
            or not isinstance(block["text"], str)
        ):
            return message
        texts.append(block["text"])
    return message.model_copy(update={"content": "".join(texts)})


_TOOL_SCHEMAS: SchemaDerived[dict[str, Any]] = SchemaDerived()


def _openai_tool(tool: Any, strict: bool | None) -> Any:
    if not isinstance(tool, BaseTool):
        return tool
    return _TOOL_SCHEMAS.get(tool, lambda: _converted(tool, strict), strict)


def _converted(tool: BaseTool, strict: bool | None) -> dict[str, Any]:
    formatted = convert_to_openai_tool(tool, strict=strict)
    for extra in _TOOL_EXTRAS_PASSTHROUGH:
        if isinstance(tool.extras, dict) and extra in tool.extras:
            formatted[extra] = tool.extras[extra]
    return formatted
