"""Middleware 2: limit the model calls of one run, ending it gracefully at the limit.

The count is part of the graph state (checkpointed), reset when a run starts, so a run resumed
after a crash keeps counting where it was. At the limit the run ends with a stop message
(:data:`~drydock.middleware.outcome.StopReason.STEP_LIMIT`), which the status indicator and the
step-limit notice act on.
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState, hook_config
from langchain.agents.middleware.types import PrivateStateAttr
from langgraph.runtime import Runtime

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

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: ModelCallLimitState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        if state.get("model_calls", 0) < self.run_limit:
            return None
        text = (
            f"I stopped after {self.run_limit} model calls, the step limit of one run, before the work was "
            "finished. Reply in this conversation and I will continue from here."
        )
        return {"jump_to": "end", "messages": [stop_message(StopReason.STEP_LIMIT, text)]}

    async def aafter_model(self, state: ModelCallLimitState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return {"model_calls": state.get("model_calls", 0) + 1}
