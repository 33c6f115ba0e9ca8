"""The summarization middleware's token counter, remembering what it already counted.

Deep Agents' summarization counts the whole conversation and every tool schema before each
model call. LangChain's ``count_tokens_approximately`` redoes all of it each time, including the
tools' JSON schemas: about a third of an agent step's own CPU here. This counter gives the same
numbers (it sums the same per-message approximation and applies the same usage-metadata
scaling) but counts each message once per run and each tool list once per process.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from deepagents.backends.protocol import BackendProtocol
from deepagents.middleware.summarization import create_summarization_middleware
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, MessageLikeRepresentation, convert_to_messages
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import BaseTool

from drydock.models import tool_identity

SCALE_BOUNDS = (1.0, 1.25)
"""How far the last reply's reported token use may scale the approximation (LangChain's rule)."""


class CachedTokenCounter:
    """``count_tokens_approximately(messages, tools=..., use_usage_metadata_scaling=True)``,
    with each message's and each tool list's count remembered.

    A message is remembered by identity and the length of its content, so a message replaced
    or edited in place is counted again. One counter serves one run; the tool lists' counts
    are shared by all runs of the process, since runs build the same tools anew.
    """

    _tools: ClassVar[dict[tuple[Any, ...], tuple[Sequence[Any], int]]] = {}
    _tools_bound: ClassVar[int] = 256

    def __init__(self) -> None:
        self._messages: dict[int, tuple[BaseMessage, int, int]] = {}

    def __call__(self, messages: Iterable[MessageLikeRepresentation], *, tools: Sequence[Any] | None = None) -> int:
        converted = convert_to_messages(messages)
        total = float(self._tools_tokens(tools)) if tools else 0.0
        provider: str | None = None
        mixed_providers = False
        last_reported: int | None = None
        approximate_at_last: float | None = None
        for message in converted:
            total += self._message_tokens(message)
            if isinstance(message, AIMessage):
                model_provider = message.response_metadata.get("model_provider")
                if provider is None:
                    provider = model_provider
                elif model_provider != provider:
                    mixed_providers = True
                reported = message.usage_metadata["total_tokens"] if message.usage_metadata else None
                if isinstance(reported, int):
                    last_reported, approximate_at_last = reported, total
        if (
            len(converted) > 1
            and not mixed_providers
            and provider is not None
            and last_reported is not None
            and approximate_at_last
        ):
            low, high = SCALE_BOUNDS
            total *= min(high, max(low, last_reported / approximate_at_last))
        if len(self._messages) > 2 * len(converted) + 64:
            # Copies of messages (a rebuilt system prompt, say) would otherwise pile up.
            current = {id(message) for message in converted}
            self._messages = {key: entry for key, entry in self._messages.items() if key in current}
        return math.ceil(total)

    def _message_tokens(self, message: BaseMessage) -> int:
        size = len(message.content)
        known = self._messages.get(id(message))
        if known is not None and known[0] is message and known[1] == size:
            return known[2]
        tokens = count_tokens_approximately([message])
        self._messages[id(message)] = (message, size, tokens)
        return tokens

    def _tools_tokens(self, tools: Sequence[Any]) -> int:
        key = tuple(_tool_identity(tool) for tool in tools)
        known = self._tools.get(key)
        if known is not None:
            return known[1]
        # An empty conversation costs nothing, so this is the tools' share alone.
        tokens = count_tokens_approximately([], tools=list(tools))
        if len(self._tools) >= self._tools_bound:
            self._tools.clear()
        # The tools are kept so that the ids in the key are not reused.
        self._tools[key] = (tools, tokens)
        return tokens


def _tool_identity(tool: Any) -> Any:
    """What a tool's count depends on. Middleware hands over copies of the same tools on every
    model call, and every run builds them anew (with the same schema objects), so the tool's
    own identity would never match."""
    return tool_identity(tool) if isinstance(tool, BaseTool) else id(tool)


def summarization(model: BaseChatModel, backend: BackendProtocol) -> AgentMiddleware[Any, Any, Any]:
    """Deep Agents' summarization middleware for ``model`` with a :class:`CachedTokenCounter`.

    Given to ``create_deep_agent`` among the middleware, it replaces the default one of the same
    name in place, in the agent and in its general-purpose subagent.
    """
    return create_summarization_middleware(model, backend, token_counter=CachedTokenCounter())
