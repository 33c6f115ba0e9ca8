"""Middleware 2: limit the model calls of one run, ending it gracefully at the limit.

The count is part of the graph state (checkpointed). A new turn's input sets it to nothing
(:func:`fresh_count`), and a resumed turn has no input, so a run resumed after a crash keeps
counting where it was. The reset travels with the input instead of a ``before_agent`` hook,
which would be a graph node with a checkpoint of its own before every run's first model call.
One instance counts one run (the worker builds a run's middleware with it). At the limit the
run ends with a stop message (:data:`~drydock.middleware.outcome.StopReason.STEP_LIMIT`), which
the status indicator and the step-limit notice act on.

One run has one budget (:class:`StepBudget`), shared by the agent and the subagents its ``task``
calls start: a subagent's stack holds a ``ModelCallLimit(budget, subagent=True)`` on the same
budget, which counts its calls there and never resets it; the agent's next model call takes
the count from the budget, so the subagent's calls are written to the agent's checkpointed
count too. Every call is counted before it is made (and given back if it fails), so parallel
subagents cannot all take the last call.

It is the limit on spend as well: before each call it asks the run's ``spend`` guard (a
:class:`~drydock.budgets.SpendCheck`: the run's spend limit and the day budgets); at a limit the
run ends with a :data:`~drydock.middleware.outcome.StopReason.BUDGET` stop message carrying the
limit reached, on which the worker pauses the thread and tells its source how to continue.

Each reply's token usage and cost is recorded here too (``usage``, a
:class:`~drydock.usage.UsageRecorder`), at the same boundary: the step limit bounds spend as well
as calls, and a subagent's calls are recorded by its own stack's limit on the run's recorder. So
is each call's trace span (:func:`~drydock.telemetry.tracing.model_span`), for the same reason.

The check wraps the model call instead of running as a ``before_model`` hook, because every
hook is a graph node with its own checkpoint: the stop message stands in for the model's reply
(no tool calls, so the agent ends), and the count is written with the reply.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired, cast

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelCallResult,
    ModelRequest,
    ModelResponse,
)
from langchain.agents.middleware.types import OmitFromOutput
from langchain_core.messages import AIMessage
from langgraph.types import Command

from drydock.budgets.reached import Reached
from drydock.middleware.outcome import BUDGET_KEY, StopReason, stop_message
from drydock.middleware.protocols import SpendGuard, UsageRecorder
from drydock.telemetry.tracing import model_span, record_usage


@dataclass
class StepBudget:
    """The model calls one run may make, shared by its agent and the subagents it starts."""

    limit: int
    spent: int = 0

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ValueError(f"the step limit must be at least 1, not {self.limit}")


class ModelCallLimitState(AgentState[Any]):
    # An input, so that a new turn's input resets it; never an output.
    model_calls: NotRequired[Annotated[int, OmitFromOutput]]


def fresh_count() -> dict[str, int]:
    """What a new turn's input carries for its count to start from nothing."""
    return {"model_calls": 0}


class ModelCallLimit(AgentMiddleware[ModelCallLimitState, Any, Any]):
    """Ends the run before model call ``limit + 1`` of its budget (a number: a budget of its own)."""

    state_schema = ModelCallLimitState

    def __init__(
        self,
        budget: StepBudget | int,
        *,
        subagent: bool = False,
        usage: UsageRecorder | None = None,
        spend: SpendGuard | None = None,
    ) -> None:
        super().__init__()
        self.budget = budget if isinstance(budget, StepBudget) else StepBudget(budget)
        self.subagent = subagent
        self.usage = usage
        self.spend = spend

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        budget = self.budget
        calls = budget.spent
        if not self.subagent:
            calls = max(calls, cast(ModelCallLimitState, request.state).get("model_calls", 0))
        if calls >= budget.limit:
            text = (
                f"I stopped after {budget.limit} model calls, the step limit of one run, before the work was "
                "finished. Reply in this conversation and I will continue from here."
            )
            return self._stop(stop_message(StopReason.STEP_LIMIT, text), calls)
        reached = None
        if self.spend is not None:
            # The roll-ups are written beside the run; the check must see the previous call's cost.
            if self.usage is not None:
                await self.usage.flush()
            reached = await self.spend.reached()
        if reached is not None:
            return self._stop(
                stop_message(StopReason.BUDGET, budget_stop_text(reached), **{BUDGET_KEY: reached.to_json()}), calls
            )
        budget.spent = calls + 1
        try:
            with model_span(_model_id(request.model)) as traced:
                response = await handler(request)
                if traced is not None:
                    record_usage(traced, response.result)
        except BaseException:
            budget.spent -= 1
            raise
        if self.usage is not None:
            await _record(self.usage, request, response)
        if self.subagent:
            return response
        return ExtendedModelResponse(model_response=response, command=Command(update={"model_calls": budget.spent}))

    def _stop(self, stop: AIMessage, calls: int) -> ModelCallResult[Any]:
        if self.subagent:
            return stop
        return ExtendedModelResponse(
            model_response=ModelResponse(result=[stop]), command=Command(update={"model_calls": calls})
        )


def budget_stop_text(reached: Reached) -> str:
    """The stop message at a spend limit (the worker tells the source conversation)."""
    return f"I stopped at {reached.limit_text}: I {reached.spent_text}."


async def _record(usage: UsageRecorder, request: ModelRequest[Any], response: ModelResponse[Any]) -> None:
    model = _model_id(request.model)
    for message in response.result:
        if isinstance(message, AIMessage):
            await usage.record(message, model)


def _model_id(model: object) -> str:
    for attribute in ("model_name", "model"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__
