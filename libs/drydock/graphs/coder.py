"""The ``coder`` graph (named in ``langgraph.json``): a deep agent working in the thread's
sandbox, with the coder's tools, the framework's todo tool for its plan whatever the model
(:class:`~drydock.middleware.planning.Planning`), its ordered middleware stack, and its
general-purpose subagent inside that stack (:mod:`drydock.graphs.subagents`).

The graph is compiled once per model and fallback model and shared by the process's runs
(:mod:`drydock.graphs.shared`); :func:`coder_run` builds what one run brings to it.
"""

from __future__ import annotations

from typing import Any

from deepagents import create_deep_agent
from langchain.agents.middleware import AgentMiddleware
from langgraph.graph.state import CompiledStateGraph

from drydock.graphs.coder_prompt import coder_prompt
from drydock.graphs.inputs import AgentInputs
from drydock.graphs.shared import (
    GRAPHS,
    RunBackend,
    RunContext,
    RunSubagent,
    placeholder_tools,
    shared_stack,
)
from drydock.graphs.subagents import coder_subagent, general_purpose
from drydock.graphs.token_count import summarization
from drydock.middleware import (
    BackendInstructionFiles,
    Planning,
    SandboxCircuitBreaker,
    StepBudget,
    at_the_provider_edge,
    coder_middleware,
)


def coder_run(inputs: AgentInputs) -> RunContext:
    """What one run of ``inputs.scope.thread_id`` brings to the shared coder graph."""
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
    steps: list[AgentMiddleware[Any, Any, Any]] = [
        Planning(refusal=inputs.plan_refusal),
        *at_the_provider_edge(middleware),
        summarization(inputs.model, inputs.backend),
    ]
    return RunContext(
        model=inputs.model,
        middleware=steps,
        tools=inputs.tools,
        backend=inputs.backend,
        system_prompt=coder_prompt(
            scope, inputs.checkout, branch_prefix=inputs.branch_prefix, auto_open_pr=inputs.auto_open_pr
        ),
        subagent=coder_subagent(inputs, budget, breaker)["runnable"],
    )


def coder_graph(inputs: AgentInputs) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The process's coder graph for ``inputs``' model, fallback model and checkpointer, compiled
    at the first run that needs it."""
    return GRAPHS.of(
        "coder", inputs.model, inputs.fallback, inputs.checkpointer, lambda: shared_coder(inputs, coder_run(inputs))
    )


def shared_coder(inputs: AgentInputs, run: RunContext) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The coder graph for ``inputs``' model and fallback model, shaped after ``run``; it keeps
    nothing of that run (its middleware and tools stand in for each run's own)."""
    return create_deep_agent(
        inputs.model,
        placeholder_tools(run.tools),
        middleware=shared_stack(run.middleware),
        subagents=[general_purpose(RunSubagent())],
        backend=RunBackend(),
        checkpointer=inputs.checkpointer,
        name="coder",
    )
