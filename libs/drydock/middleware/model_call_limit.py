"""Middleware 2: limit the model calls of one run, ending it gracefully at the limit.

The count is part of the graph state (checkpointed), reset when a run starts, so a run resumed
after a crash keeps counting where it was. At the limit the run ends with a stop message
(:data:`~drydock.middleware.outcome.StopReason.STEP_LIMIT`), which the status indicator and the
step-limit notice act on.

The check wraps the model call instead of running as a ``before_model`` hook, because every
hook is a graph node with its own checkpoint: the stop message stands in for the model's reply
(no tool calls, so the agent ends), and the count is written with the reply.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NotRequired, cast

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelCallResult,
    ModelRequest,
    ModelResponse,
)
from langchain.agents.middleware.types import PrivateStateAttr
from langgraph.runtime import Runtime
from langgraph.types import Command

from drydock.middleware.outcome import StopReason, stop_message


class ModelCallLimitState(AgentState[Any]):
    model_calls: NotRequired[Annotated[int, PrivateStateAttr]]


class ModelCallLimit(AgentMiddleware[ModelCallLimitState, Any, Any]):
    """Ends the run before model call ``run_limit + 1``."""

    state_schema = ModelCallLimitState

    def __init__(self, run_limit: int) -> None:
        super().__init__()
        if run_limit < 1:
            raise ValueError(f"run_limit must be at least 1, not {run_limit}")
        self.run_limit = run_limit

    async def abefore_agent(self, state: ModelCallLimitState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return {"model_calls": 0}

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        calls = cast(ModelCallLimitState, request.state).get("model_calls", 0)
        if calls >= self.run_limit:
            text = (
                f"I stopped after {self.run_limit} model calls, the step limit of one run, before the work was "
                "finished. Reply in this conversation and I will continue from here."
            )
            return stop_message(StopReason.STEP_LIMIT, text)
        response = await handler(request)
        return ExtendedModelResponse(model_response=response, command=Command(update={"model_calls": calls + 1}))
