"""Middleware 11: strip provider-specific reasoning blocks the provider about to be called
cannot take, immediately before the call (the innermost model wrapper of our stack).

Reasoning blocks in assistant content are specific to the API that produced them and are
replayable only whole: OpenAI Responses ``reasoning`` items (an ``rs_`` id and a summary list),
Anthropic ``thinking`` (text and a signature) and ``redacted_thinking`` (data), LangChain's
standard ``reasoning`` block (text). A block is kept only when its family is one the target API
takes (``accepted``) and it carries its required fields; every other one is malformed for the
call and removed. Drydock calls models over Chat Completions, which takes none, so by default
every reasoning block goes. ``langchain-openai`` drops some families itself but sends others
(Anthropic's ``redacted_thinking``, after a history from another provider) to the endpoint,
which rejects the request; this middleware does not depend on the client's filtering. Only the
request changes: the checkpointed history keeps the blocks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, AnyMessage

REASONING_TYPES = frozenset({"reasoning", "thinking", "redacted_thinking", "reasoning_content"})


def _text(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def _well_formed(block: dict[str, Any]) -> bool:
    kind = block.get("type")
    if kind == "thinking":
        return isinstance(block.get("thinking"), str) and _text(block.get("signature"))
    if kind == "redacted_thinking":
        return _text(block.get("data"))
    if kind == "reasoning" and "summary" in block:
        summary = block["summary"]
        return (
            isinstance(block.get("id"), str)
            and block["id"].startswith("rs_")
            and isinstance(summary, list)
            and all(isinstance(part, dict) and isinstance(part.get("text"), str) for part in summary)
        )
    if kind == "reasoning":
        return isinstance(block.get("reasoning"), str)
    return False


def _stripped(message: AIMessage, accepted: frozenset[str]) -> AIMessage | None:
    if not isinstance(message.content, list):
        return None
    kept = [
        block
        for block in message.content
        if not (isinstance(block, dict) and block.get("type") in REASONING_TYPES)
        or (block.get("type") in accepted and _well_formed(block))
    ]
    if len(kept) == len(message.content):
        return None
    return message.model_copy(update={"content": kept or ""})


class StripMalformedReasoning(AgentMiddleware[AgentState[Any], Any, Any]):
    """Removes reasoning blocks the target API cannot take from the request's assistant messages."""

    def __init__(self, accepted: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.accepted = accepted

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        messages: list[AnyMessage] = []
        changed = False
        for message in request.messages:
            stripped = _stripped(message, self.accepted) if isinstance(message, AIMessage) else None
            changed = changed or stripped is not None
            messages.append(stripped or message)
        return await handler(request.override(messages=messages) if changed else request)
