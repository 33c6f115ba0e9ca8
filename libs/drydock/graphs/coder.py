"""The ``coder`` graph (named in ``langgraph.json``): a deep agent working in the thread's
sandbox, with the coder's tools, the framework's todo tool for its plan whatever the model
(:class:`~drydock.middleware.planning.Planning`), its ordered middleware stack, and its
general-purpose subagent inside that stack (:mod:`drydock.graphs.subagents`)."""

from __future__ import annotations

from typing import Any

from deepagents import create_deep_agent
from langgraph.graph.state import CompiledStateGraph

from drydock.graphs.coder_prompt import coder_prompt
from drydock.graphs.inputs import AgentInputs
from drydock.graphs.subagents import coder_subagent
from drydock.graphs.token_count import summarization
from drydock.middleware import (
    BackendInstructionFiles,
    Planning,
    SandboxCircuitBreaker,
    StepBudget,
    at_the_provider_edge,
    coder_middleware,
)


def make_coder(inputs: AgentInputs) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A fresh coder agent for one run of ``inputs.scope.thread_id``."""
    scope = inputs.scope
    budget = StepBudget(inputs.limits.model_calls)
    middleware = coder_middleware(
        thread_id=scope.thread_id,
        inbox=inputs.inbox,
        sandbox_failures=inputs.sandbox_failures,
        status=inputs.status,
        notifier=inputs.notifier,
        instructions=BackendInstructionFiles(inputs.backend),
        repository_root=inputs.checkout.path if inputs.checkout is not None else "/",
        fallback=inputs.fallback,
        limits=inputs.limits,
        budget=budget,
        usage=inputs.usage,
        spend=inputs.spend,
        redactor=inputs.redactor,
    )
    breaker = next(m for m in middleware if isinstance(m, SandboxCircuitBreaker))
    return create_deep_agent(
        inputs.model,
        inputs.tools,
        system_prompt=coder_prompt(
            scope, inputs.checkout, branch_prefix=inputs.branch_prefix, auto_open_pr=inputs.auto_open_pr
        ),
        middleware=[
            Planning(refusal=inputs.plan_refusal),
            *at_the_provider_edge(middleware),
            summarization(inputs.model, inputs.backend),
        ],
        subagents=[coder_subagent(inputs, budget, breaker)],
        backend=inputs.backend,
        checkpointer=inputs.checkpointer,
        name="coder",
    )
