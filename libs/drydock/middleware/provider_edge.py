"""The last change to a request before the provider: the framework's unsupported-content
handling, then step 11 (:class:`~drydock.middleware.strip_reasoning.StripMalformedReasoning`).

``deepagents.create_deep_agent`` appends middleware of its own after the caller's (prompt
caching, then ``UnsupportedContentMiddleware`` last), and ``create_agent`` runs the last
middleware innermost, closest to the provider. :class:`ProviderEdge` takes the framework's last
slot by name, so the framework's placement keeps it innermost: it does the framework's
unsupported-content work and then strips malformed reasoning, which is therefore the last
change to a request, after anything the framework adds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from deepagents.middleware.unsupported_content import UnsupportedContentMiddleware
from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse

from drydock.middleware.strip_reasoning import StripMalformedReasoning

FRAMEWORK_LAST = UnsupportedContentMiddleware.__name__
"""The name of the framework's last middleware, whose slot the edge takes."""


class ProviderEdge(AgentMiddleware[AgentState[Any], Any, Any]):
    """The framework's ``UnsupportedContentMiddleware``, then ``strip``: innermost, in that order."""

    def __init__(self, strip: StripMalformedReasoning) -> None:
        super().__init__()
        self.unsupported = UnsupportedContentMiddleware()
        self.strip = strip

    @property
    def name(self) -> str:
        return FRAMEWORK_LAST

    @property
    def steps(self) -> tuple[str, ...]:
        """What the edge does to a request, in order."""
        return (self.unsupported.name, self.strip.name)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        async def stripped(request: ModelRequest[Any]) -> ModelResponse[Any]:
            return await self.strip.awrap_model_call(request, handler)

        return await self.unsupported.awrap_model_call(request, stripped)
